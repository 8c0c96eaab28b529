"""The profile of the launch (full run only; informative)."""

import os
import re

from harness import Missing, BenchError, Skip, LIVE, spawn, run, need, median, ms, ratio, shared_objects


def callgrind(argv, work, tag):
    """Instructions (Ir) of the supervising process only (callgrind follows the
    fork but not the exec of COMMAND): total, in the dynamic loader
    (_dl_start, inclusive) and in main (inclusive)."""
    valgrind, annotate = need("valgrind", "callgrind_annotate")
    out = os.path.join(work, "cg.%s.%%p" % tag)
    r = run([valgrind, "--tool=callgrind", "--callgrind-out-file=" + out] + argv, 120)
    m = re.search(r"==(\d+)== Collected", r.stderr)
    if r.returncode != 0 or not m:
        raise BenchError("valgrind failed: %s" % r.stderr[-300:])
    f = out.replace("%p", m.group(1))
    a = run([annotate, "--inclusive=yes", f], 60).stdout
    total = dl = main = reloc = None
    for line in a.splitlines():
        mm = re.match(r"\s*([\d,]+)\s+\([\d. ]+%\)\s+(.*)$", line)
        if not mm:
            continue
        v, what = int(mm.group(1).replace(",", "")), mm.group(2)
        if what.startswith("PROGRAM TOTALS") and total is None:
            total = v
        elif re.search(r":_dl_start \[", what) and dl is None:
            dl = v
        elif re.search(r":_dl_relocate_object \[", what) and reloc is None:
            reloc = v
        elif re.search(r":main \[", what) and main is None:
            main = v
    return total, dl, reloc, main


def rusage_of(argv, n):
    """Median minor page faults and CPU ms of `argv` (and its waited-for child)."""
    flt, cpu = [], []
    for _ in range(n):
        pid = spawn(argv)
        _, status, ru = os.wait4(pid, 0)
        LIVE.discard(pid)
        if os.waitstatus_to_exitcode(status) != 0:
            raise BenchError("%s exited %s" % (argv, status))
        flt.append(ru.ru_minflt)
        cpu.append((ru.ru_utime + ru.ru_stime) * 1000)
    return median(flt), median(cpu)


def bench(ctx, sec):
    """Where prebind's launch time goes, next to tini: callgrind instruction
    counts (dynamic loader vs main), minor page faults (getrusage), and the
    shared objects the loader maps."""
    try:
        tini = need("tini", "valgrind", "callgrind_annotate")[0]
    except Missing as e:
        raise Skip("optional, not installed: %s" % e)
    rows = []
    for name, argv in [("prebind -q -- true", [ctx.prebind, "-q", "--", "/usr/bin/true"]),
                       ("tini -s -- true", [tini, "-s", "--", "/usr/bin/true"])]:
        total, dl, reloc, main = callgrind(argv, ctx.work, name.split()[0])
        flt, cpu = rusage_of(argv, 50)
        libs = shared_objects(argv[0])
        rows.append(["`%s`" % name, "{:,}".format(total or 0), "{:,}".format(dl or 0),
                     "{:,}".format(reloc or 0), "{:,}".format(main or 0), "%d" % flt, ms(cpu),
                     "%d: %s" % (len(libs), ", ".join(os.path.basename(l) for l in libs))])
    sec.table(["command", "Ir total", "Ir in ld.so (_dl_start)", "… relocation", "Ir in main",
               "minor faults (with child)", "CPU ms (with child)", "shared objects"], rows)
    p, t = rows[0], rows[1]
    sec.summary.append(["launch profile: instructions", p[1] + " Ir (%s in ld.so)" % p[2],
                        "tini " + t[1] + " Ir", ratio(float(p[1].replace(",", "")), float(t[1].replace(",", ""))),
                        "—", "—"])
    sec.notes.append("callgrind counts the supervising process up to its exit (the exec'd `true` is "
                     "not traced); page faults and CPU from wait4's rusage, median of 50.")

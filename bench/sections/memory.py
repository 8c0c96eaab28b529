"""2. Memory of the supervising process."""

import re

from harness import BenchError, run, need, median, ratio, verdict, supervisor_memory, shared_objects


def bench(ctx, sec):
    """Peak RSS (VmHWM) of the supervising process itself, read from /proc
    while COMMAND (sleep) runs under it; the supervisors run at the same time.
    /usr/bin/time -v's maximum RSS (the biggest of X and its waited-for child)
    is shown for reference."""
    tini, dumb_init, catatonit = need("tini", "dumb-init", "catatonit")
    timebin = need("time")
    sleep = "/usr/bin/sleep"
    pb = ctx.prebind
    nap = "0.5" if ctx.smoke else "1"
    sups = [
        ("prebind", [pb, "-q", "--"]),
        ("tini -s", [tini, "-s", "--"]),
        ("dumb-init", [dumb_init]),
        ("catatonit", [catatonit, "--"]),
    ]
    reps = 1 if ctx.smoke else 5
    got = supervisor_memory(sups, sleep, nap, reps)
    # /usr/bin/time -v X true, for reference
    tmax = {}
    for name, argv in sups + [("(true alone)", [])]:
        vals = []
        for _ in range(1 if ctx.smoke else 3):
            r = run([timebin, "-v"] + argv + ["/usr/bin/true"], 30)
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
            if r.returncode != 0 or not m:
                raise BenchError("/usr/bin/time -v %s true failed: %s" % (name, r.stderr[-300:]))
            vals.append(int(m.group(1)))
        tmax[name] = median(vals)
    hwm = {n: median([v[0] for v in got[n]]) for n in got}
    rows = []
    for name, argv in sups:
        v = got[name]
        rows.append([name, "%d" % hwm[name], "%d" % median([x[1] for x in v]),
                     "%d" % median([x[2] for x in v]), "%d" % median([x[3] for x in v]),
                     ratio(hwm[name], hwm["tini -s"]), "%d" % tmax[name],
                     "%d" % len(shared_objects(argv[0]))])
    rows.append(["(`true` alone)", "", "", "", "", "", "%d" % tmax["(true alone)"], ""])
    sec.table(["supervisor", "VmHWM kB", "VmRSS kB", "PSS kB", "USS kB", "HWM vs tini",
               "time -v max RSS kB", "shared objects"], rows)
    sec.notes.append("Supervisor's own /proc/PID/status and smaps_rollup while `sleep %s` runs under it; "
                     "median of %d; all four run side by side. USS = private clean + dirty." % (nap, reps))
    sec.notes.append("Shared objects: what the dynamic loader maps (ld.so and libc included; 0 = static). "
                     "Their touched pages count in RSS; PSS divides shared pages among their users.")
    ctx.results["memory"] = hwm
    sec.summary.append(["peak RSS while supervising", "%d kB" % hwm["prebind"],
                        "tini %d kB" % hwm["tini -s"], ratio(hwm["prebind"], hwm["tini -s"]),
                        "≤ 2.00×", verdict(hwm["prebind"] <= 2 * hwm["tini -s"])])

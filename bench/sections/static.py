"""12. The static binary, next to tini-static."""

import os
import shutil

from harness import (DEFAULT_PATH, ENV, Skip, run, need, median, ms, ratio, verdict, hyperfine_rounds,
                     supervisor_memory)


def image_bytes(path):
    """What a container image needs to run path: the file and every shared
    object the loader maps for it (the loader included), in bytes."""
    env = dict(ENV, LD_TRACE_LOADED_OBJECTS="1")
    files = [path]
    for line in run([path], 30, env=env).stdout.splitlines():
        # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)", "/lib64/ld-linux-x86-64.so.2 (0x…)"
        words = line.split() if "(0x" in line else []
        where = words[2] if len(words) > 2 and words[1] == "=>" else words[0] if words else ""
        if where.startswith("/"):
            files.append(os.path.realpath(where))
    return sum(os.path.getsize(f) for f in files), len(files) - 1


def stripped_size(ctx, path):
    strip = shutil.which("strip", path=DEFAULT_PATH)
    if not strip:
        return None
    out = os.path.join(ctx.work, "stripped-" + os.path.basename(path))
    r = run([strip, "-o", out, path], 30)
    return os.path.getsize(out) if r.returncode == 0 else None


def bench(ctx, sec):
    """prebind-static (musl, meson/musl-static.ini) next to Debian's
    tini-static, the dynamic prebind and tini, and dumb-init: launch cost of
    `X -- true` (hyperfine_rounds()), the supervisor's memory while a child
    runs (supervisor_memory()), and the size on disk: the file, stripped,
    and what an image must carry to run it (the file and its shared
    objects)."""
    if not ctx.prebind_static:
        raise Skip("no prebind-static: meson setup build-static --native-file meson/musl-static.ini "
                   "&& meson compile -C build-static (or --prebind-static PATH)")
    tini, tini_static, dumb_init = need("tini", "tini-static", "dumb-init")
    true, sleep = "/usr/bin/true", "/usr/bin/sleep"
    pbs, pb = ctx.prebind_static, ctx.prebind
    cmds = [
        ("prebind-static", [pbs, "-q", "--", true]),
        ("tini-static -s", [tini_static, "-s", "--", true]),
        ("prebind", [pb, "-q", "--", true]),
        ("tini -s", [tini, "-s", "--", true]),
        ("dumb-init", [dumb_init, true]),
        ("true", [true]),
    ]
    times, user, system, runs, warmup, rounds = hyperfine_rounds(ctx, cmds)
    med = {n: median(times[n]) for n in times}
    nap = "0.5" if ctx.smoke else "1"
    sups = [(name, argv[:-1]) for name, argv in cmds if name != "true"]
    got = supervisor_memory(sups, sleep, nap, 1 if ctx.smoke else 5)
    hwm = {n: median([v[0] for v in got[n]]) for n in got}
    uss = {n: median([v[3] for v in got[n]]) for n in got}
    rows = []
    size = {}
    for name, argv in cmds[:-1]:
        path = argv[0]
        orig = ctx.prebind_static_orig if path == pbs else ctx.prebind_orig if path == pb else path
        on_disk = os.path.getsize(orig)
        stripped = stripped_size(ctx, path)
        total, n_libs = image_bytes(path)
        # The image needs the stripped file (as `meson install` and the
        # Debian package ship it) and its libraries.
        size[name] = (stripped or on_disk) + total - os.path.getsize(path)
        rows.append(["`%s`" % " ".join([os.path.basename(orig)] + argv[1:]), ms(med[name]),
                     ratio(med[name], med["tini-static -s"]), "%d" % hwm[name], "%d" % uss[name],
                     ratio(hwm[name], hwm["tini-static -s"]), "%.0f" % (on_disk / 1024),
                     "%.0f" % ((stripped or on_disk) / 1024), "%d" % n_libs, "%.0f" % (size[name] / 1024)])
    rows.append(["`true`", ms(med["true"]), ratio(med["true"], med["tini-static -s"]), "", "", "", "", "", "", ""])
    sec.table(["command", "launch median ms", "vs tini-static", "VmHWM kB", "USS kB", "HWM vs tini-static",
               "file kB", "stripped kB", "shared objects", "image needs kB"], rows)
    sec.notes.append("Launch: hyperfine -N, %d warm-up + %d runs per command and round, %d round(s), "
                     "`X -q -- true` (prebind also binds 127.0.0.1:0 first). Memory: the supervisor "
                     "while `sleep %s` runs under it, all side by side." % (warmup, runs, rounds, nap))
    sec.notes.append("Size: the file as built (prebind's build keeps its symbols; `meson install` and the "
                     "Debian package strip it), stripped with `strip`, and what an image needs to run "
                     "it: the stripped file plus its shared objects (ld.so, libc.so.6), as in `FROM scratch`.")
    sec.notes.append("dumb-init is dynamic in Debian (upstream also ships a static build).")
    sec.summary.append(["launch `prebind-static -- true`", ms(med["prebind-static"]) + " ms",
                        "tini-static " + ms(med["tini-static -s"]) + " ms",
                        ratio(med["prebind-static"], med["tini-static -s"]), "≤ 0.80×",
                        verdict(med["prebind-static"] <= 0.8 * med["tini-static -s"])])
    sec.summary.append(["peak RSS, prebind-static", "%d kB" % hwm["prebind-static"],
                        "tini-static %d kB" % hwm["tini-static -s"],
                        ratio(hwm["prebind-static"], hwm["tini-static -s"]), "≤ 0.80×",
                        verdict(hwm["prebind-static"] <= 0.8 * hwm["tini-static -s"])])
    sec.summary.append(["size, prebind-static (stripped)", "%.0f kB" % (size["prebind-static"] / 1024),
                        "tini-static %.0f kB" % (size["tini-static -s"] / 1024),
                        ratio(size["prebind-static"], size["tini-static -s"]), "—", "—"])
    ctx.results["static"] = {"launch": med, "hwm": hwm, "image_bytes": size}

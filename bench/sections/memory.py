"""2. Memory of the supervising process."""

from harness import need, median, ratio, verdict, supervisor_memory, shared_objects, peak_rss


def bench(ctx, sec):
    """Peak RSS (VmHWM) of the supervising process itself, read from /proc
    while COMMAND (sleep) runs under it; the supervisors run at the same time.
    And the peak RSS of `X -- true` by `/usr/bin/time -f %M` (the biggest of
    X and its waited-for child), the static builds too when there is one."""
    tini, dumb_init, catatonit = need("tini", "dumb-init", "catatonit")
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
    # Peak RSS of `X -- true` as /usr/bin/time -f %M reports it (the
    # biggest of X and the children it waited for), alternated.
    true = "/usr/bin/true"
    peers = sups + [("(true alone)", [])]
    if ctx.prebind_static:
        tini_static = need("tini-static")
        peers += [("prebind-static", [ctx.prebind_static, "-q", "--"]), ("tini-static -s", [tini_static, "-s", "--"])]
    peak = peak_rss([(name, argv + [true]) for name, argv in peers], 3 if ctx.smoke else 30)
    tmax = {name: median(v) for name, v in peak.items()}
    hwm = {n: median([v[0] for v in got[n]]) for n in got}
    rows = []
    for name, argv in sups:
        v = got[name]
        rows.append([name, "%d" % hwm[name], "%d" % median([x[1] for x in v]),
                     "%d" % median([x[2] for x in v]), "%d" % median([x[3] for x in v]),
                     ratio(hwm[name], hwm["tini -s"]), "%d" % tmax[name],
                     "%d" % len(shared_objects(argv[0]))])
    rows.append(["(`true` alone)", "", "", "", "", "", "%d" % tmax["(true alone)"], ""])
    for name in ("prebind-static", "tini-static -s"):
        if name in tmax:
            rows.append([name, "", "", "", "", "", "%d" % tmax[name], "0"])
    sec.table(["supervisor", "VmHWM kB", "VmRSS kB", "PSS kB", "USS kB", "HWM vs tini",
               "`time -f %M X -- true` kB", "shared objects"], rows)
    sec.notes.append("Supervisor's own /proc/PID/status and smaps_rollup while `sleep %s` runs under it; "
                     "median of %d; all four run side by side. USS = private clean + dirty." % (nap, reps))
    sec.notes.append("`/usr/bin/time -f %%M X -- true`: the peak RSS of X and the children it waited for "
                     "(prebind's guard is not one: it is reparented), median of %d, the commands "
                     "alternated." % (3 if ctx.smoke else 30))
    sec.notes.append("Shared objects: what the dynamic loader maps (ld.so and libc included; 0 = static). "
                     "Their touched pages count in RSS; PSS divides shared pages among their users.")
    ctx.results["memory"] = dict(hwm=hwm, peak=tmax)
    sec.summary.append(["peak RSS `X -- true` (time -f %M)", "%d kB" % tmax["prebind"],
                        "tini %d kB" % tmax["tini -s"], ratio(tmax["prebind"], tmax["tini -s"]),
                        "≤ 1.00×", verdict(tmax["prebind"] <= tmax["tini -s"])])
    sec.summary.append(["peak RSS (VmHWM) while supervising", "%d kB" % hwm["prebind"],
                        "tini %d kB" % hwm["tini -s"], ratio(hwm["prebind"], hwm["tini -s"]),
                        "≤ 1.00×", verdict(hwm["prebind"] <= hwm["tini -s"])])
    if "prebind-static" in tmax:
        sec.notes.append("The static rows: the peak is that of `true` (dynamic, ~1 MB), bigger than either "
                         "static supervisor; section 12 compares the supervisors themselves (VmHWM).")

"""1. Launch cost: `X -- true`."""

import os
import statistics

from harness import need, median, ms, ratio, verdict, hyperfine_rounds


def launch_commands(ctx):
    tini, dumb_init, catatonit = need("tini", "dumb-init", "catatonit")
    true, env = "/usr/bin/true", "/usr/bin/env"
    pb = ctx.prebind
    return [
        ("prebind", [pb, "-q", "--", true]),
        ("prebind --exec", [pb, "-q", "--exec", "--", true]),
        ("tini -s", [tini, "-s", "--", true]),
        ("dumb-init", [dumb_init, true]),
        ("catatonit", [catatonit, "--", true]),
        ("env", [env, true]),
        ("true", [true]),
    ]


def bench(ctx, sec):
    """hyperfine_rounds() over prebind and its peers; medians over all rounds."""
    cmds = launch_commands(ctx)
    times, user, system, runs, warmup, rounds = hyperfine_rounds(ctx, cmds)
    med = {n: median(times[n]) for n in times}
    rows = []
    for name, c in cmds:
        t = times[name]
        rows.append(["`%s`" % " ".join([os.path.basename(c[0])] + c[1:]),
                     ms(med[name]), "%s ± %s" % (ms(statistics.mean(t)), ms(statistics.pstdev(t))),
                     ms(statistics.mean(user[name])), ms(statistics.mean(system[name])),
                     ratio(med[name], med["tini -s"])])
    sec.table(["command", "median ms", "mean ± sd ms", "user ms", "sys ms", "vs tini"], rows)
    sec.notes.append("hyperfine -N, %d warm-up + %d runs per command and round, %d round(s) in "
                     "rotated/reversed orders; times include the child `true`." % (warmup, runs, rounds))
    sec.notes.append("prebind also binds and listens on 127.0.0.1:0 before it forks, and starts its guard "
                     "(a process of its own that stops COMMAND if prebind is killed); the peers do neither. "
                     "user/sys: hyperfine's, of X and the children it waited for: the guard's own CPU is "
                     "not in them (it is reparented), the wall time waits for it to exit.")
    ctx.results["launch"] = med
    sec.summary.append(["launch `X -- true`", ms(med["prebind"]) + " ms",
                        "tini " + ms(med["tini -s"]) + " ms",
                        ratio(med["prebind"], med["tini -s"]), "≤ 1.00×",
                        verdict(med["prebind"] <= med["tini -s"])])
    cpu = {n: statistics.mean(user[n]) + statistics.mean(system[n]) for n in times}
    sec.summary.append(["launch CPU (user + sys) `X -- true`", ms(cpu["prebind"]) + " ms",
                        "tini " + ms(cpu["tini -s"]) + " ms", ratio(cpu["prebind"], cpu["tini -s"]), "≤ 1.00×",
                        verdict(cpu["prebind"] <= cpu["tini -s"])])

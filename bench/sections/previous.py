"""15. Against an earlier prebind: launch, accept and reload, one run."""

import json
import os
import shutil
import statistics

from harness import HERE, TOP, PYTHON, BenchError, Skip, hyperfine_rounds, median, need, ratio, run
from sections.restart import measure


def bench(ctx, sec):
    """The same three measurements of this prebind and of an earlier build
    (--prebind-previous PATH, e.g. the commit before a refactor), side by
    side in one run, so that a change of the code's shape is seen to cost
    nothing: launch (hyperfine rounds, both commands in each), the accept
    rate (bench/accept_rate, the two alternated) and p99 under overlapping
    reloads (7b's load, the two alternated). Target: each within 10 % (the
    ratio of medians; the machine is shared, so no more is claimed)."""
    if not ctx.prebind_previous:
        raise Skip("no --prebind-previous PATH given")
    wrk = need("wrk")
    previous = os.path.join(ctx.work, "prebind-previous")
    shutil.copy2(ctx.prebind_previous, previous)
    both = (("this", ctx.prebind), ("previous", previous))

    times, user, system, _, _, rounds = hyperfine_rounds(
        ctx, [(name, [path, "-q", "--", "/bin/true"]) for name, path in both])
    launch = {name: median(times[name]) for name, _ in both}
    cpu = {name: statistics.mean(user[name]) + statistics.mean(system[name]) for name, _ in both}

    accept = {name: [] for name, _ in both}
    n, passes = (200, 1) if ctx.smoke else (2000, 3)
    for _ in range(passes):
        for name, path in both:
            r = run([os.path.join(HERE, "accept_rate"), "--prebind", path, "--connections", str(n),
                     "--rounds", "1", "--json"], 600)
            if r.returncode != 0:
                raise BenchError("accept_rate failed: %s" % r.stderr[-300:])
            data = json.loads(r.stdout.strip().splitlines()[-1])
            accept[name].append(data["servers"]["prebind --accept --inetd"])

    server = os.path.join(TOP, "tests", "integration", "servers", "generation_http.py")
    seconds = 2 if ctx.smoke else 8
    p99 = {name: [] for name, _ in both}
    for i in range(1 if ctx.smoke else 2):
        for name, path in both:
            state = os.path.join(ctx.work, "previous-%s-%d" % (name, i))
            os.makedirs(state, exist_ok=True)
            _, failed, p, _ = measure(ctx, wrk, [path, "-q", "--print", "--ready", "--reload=overlap", "--", PYTHON,
                                                 server, state, "--start-delay", "0.3"], seconds, 0.5)
            if failed:
                raise BenchError("%s: %d requests failed under reloads" % (name, failed))
            p99[name].append(p)

    rows, worst = [], 0.0
    for what, unit, values, better_low in (("launch `prebind -q -- true`, wall", "ms", launch, True),
                                           ("launch, CPU (user + sys)", "ms", cpu, True),
                                           ("accept rate, `--accept --inetd`", "conn/s",
                                            {k: median(v) for k, v in accept.items()}, False),
                                           ("p99 under overlapping reloads", "ms",
                                            {k: median(v) for k, v in p99.items()}, True)):
        r = values["this"] / values["previous"] if values["previous"] else float("nan")
        cost = r if better_low else (1 / r if r else float("inf"))
        worst = max(worst, cost)
        rows.append([what, "%.2f %s" % (values["this"], unit), "%.2f %s" % (values["previous"], unit),
                     ratio(values["this"], values["previous"])])
    sec.table(["measure", "this prebind", "previous", "this / previous"], rows)
    sec.notes.append("previous: %s; hyperfine %d round(s); accept_rate %d connections × %d passes each, "
                     "alternated; wrk -t 2 -c 4 -d %ds with SIGHUP every 0.5 s × %d each, alternated"
                     % (ctx.prebind_previous, rounds, n, passes, seconds, len(p99["this"])))
    sec.summary.append(["against the previous build: worst cost (launch, CPU, accept, reload p99)",
                        "%.2f×" % worst, "", "", "≤ 1.10×", "yes" if worst <= 1.10 else "**no**"])

"""13. --share: attaching to a shared server."""

import os
import time

from harness import BenchError, spawn, reap, read_first_line, median, pct, ms, ratio, verdict, ENV


def bench(ctx, sec):
    """Time from spawn to the published address (the first line on stdout)
    for a caller of `--share=NAME` that attaches to a server that runs
    already, against prebind alone starting the same command, and a first
    caller that starts the shared supervisor (a new NAME each round,
    --share-linger=0, so it is gone right after).  The names live in a
    directory of the run's own (XDG_RUNTIME_DIR).  Stopping is not timed."""
    sleep = "/usr/bin/sleep"
    pb = ctx.prebind
    runtime = os.path.join(ctx.work, "run")
    os.mkdir(runtime, 0o700)
    env = dict(ENV, XDG_RUNTIME_DIR=runtime)
    # The holder that keeps the shared server running for every round.
    r, w = os.pipe()
    keeper = spawn([pb, "--share=bench", "--print=addr", "--", sleep, "600"], stdout_fd=w, env=env)
    os.close(w)
    shared = read_first_line(r, 10)
    os.close(r)
    if shared is None:
        raise BenchError("--share=bench: no address from the first caller")
    variants = [
        ("prebind --print=addr -- sleep (alone)", lambda i: [pb, "--print=addr", "--", sleep, "600"], False),
        ("prebind --share=bench … (attach)", lambda i: [pb, "--share=bench", "--print=addr", "--", sleep, "600"],
         True),
        ("prebind --share=NEW … (first caller)",
         lambda i: [pb, "--share=new%d" % i, "--share-linger=0", "--print=addr", "--", sleep, "600"], False),
    ]
    n, warm = (3, 1) if ctx.smoke else (150, 10)
    samples = {name: [] for name, _, _ in variants}
    deadline = time.monotonic() + (20 if ctx.smoke else 90)
    try:
        for i in range(warm + n):
            if time.monotonic() > deadline:
                sec.notes.append("time budget reached after %d rounds" % max(0, i - warm))
                break
            rot = variants[i % len(variants):] + variants[:i % len(variants)]
            for name, argv, attaches in rot:
                r, w = os.pipe()
                t0 = time.perf_counter_ns()
                pid = spawn(argv(i), stdout_fd=w, env=env)
                os.close(w)
                line = read_first_line(r, 10)
                t1 = time.perf_counter_ns()
                os.close(r)
                code = reap(pid, 5, term=True)
                if line is None or not line.startswith(b"127.0.0.1:"):
                    raise BenchError("%s: no address on stdout (got %r, exit %s)" % (name, line, code))
                if attaches and line != shared:
                    raise BenchError("%s: published %r, not the shared %r" % (name, line, shared))
                if i >= warm:
                    samples[name].append((t1 - t0) / 1e6)
    finally:
        reap(keeper, 5, term=True)
    med = {k: median(v) for k, v in samples.items()}
    alone = med[variants[0][0]]
    rows = [["`%s`" % name, len(samples[name]), ms(med[name], 3), ms(pct(samples[name], 90), 3),
             ratio(med[name], alone)] for name, _, _ in variants]
    sec.table(["command", "runs", "median ms", "p90 ms", "vs alone"], rows)
    sec.notes.append("Rows interleaved (rotating order), %d warm-up rounds; an attaching caller must publish "
                     "the shared server's address. The first caller's time includes forking the detached "
                     "supervisor, which binds and publishes to it over the name's socket." % warm)
    ctx.results["share"] = med
    attach = med[variants[1][0]]
    sec.summary.append(["--share: attach → address", ms(attach, 3) + " ms", "alone " + ms(alone, 3) + " ms",
                        ratio(attach, alone), "≤ 5 ms", verdict(attach <= 5)])

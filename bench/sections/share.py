"""13. --share: attaching to a shared server."""

import os

from harness import BenchError, spawn, reap, read_first_line, first_line_rounds, median, pct, ms, ratio, verdict, ENV


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

    def check(attaches):
        def check_line(line, code):
            if line is None or not line.startswith(b"127.0.0.1:"):
                return "no address on stdout"
            if attaches and line != shared:
                return "not the shared server's address %r" % shared
            return None
        return check_line

    try:
        samples, warm = first_line_rounds(ctx, sec, [(name, argv, check(attaches))
                                                     for name, argv, attaches in variants], env=env)
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

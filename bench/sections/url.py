"""1b. Start to a published URL."""

from harness import first_line_rounds, need, median, pct, ms, ratio


def bench(ctx, sec):
    """Time from spawn to the first line on stdout, in one python timer for
    every row (posix_spawn, a pipe, select): for prebind the line is the
    published URL (written after listen(), before COMMAND runs); the peers do
    not publish anything, so their row is the same supervisor starting a
    program that prints its address at once (/usr/bin/echo): the earliest a
    caller could learn an address through them.  Stopping is not timed."""
    tini, dumb_init, catatonit = need("tini", "dumb-init", "catatonit")
    echo, sleep = "/usr/bin/echo", "/usr/bin/sleep"
    url = "http://127.0.0.1:1"
    pb = ctx.prebind
    variants = [
        ("prebind --print=url -- sleep 10", [pb, "--print=url", "--", sleep, "10"], True),
        ("prebind --print=url --exec -- sleep 10", [pb, "--print=url", "--exec", "--", sleep, "10"], True),
        ("tini -s -- echo URL", [tini, "-s", "--", echo, url], False),
        ("dumb-init echo URL", [dumb_init, echo, url], False),
        ("catatonit -- echo URL", [catatonit, "--", echo, url], False),
        ("echo URL (no supervisor)", [echo, url], False),
    ]

    def check(is_prebind):
        def check_line(line, code):
            if line is None or not line.startswith(b"http://127.0.0.1:"):
                return "no URL on stdout"
            if is_prebind and code not in (143, -15):
                return "expected exit 143 after SIGTERM"
            return None
        return check_line

    samples, warm = first_line_rounds(ctx, sec, [(name, lambda i, a=argv: a, check(is_prebind))
                                                 for name, argv, is_prebind in variants])
    med = {k: median(v) for k, v in samples.items()}
    ref = med["tini -s -- echo URL"]
    rows = [["`%s`" % name, len(samples[name]), ms(med[name], 3),
             ms(pct(samples[name], 90), 3), ratio(med[name], ref)] for name, _, _ in variants]
    sec.table(["command", "runs", "median ms", "p90 ms", "vs tini"], rows)
    sec.notes.append("Rows interleaved (rotating order), %d warm-up rounds; the line must be a URL; "
                     "prebind must then exit 143 on SIGTERM (forwarded to sleep)." % warm)
    ctx.results["url"] = med
    sec.summary.append(["start → URL on stdout", ms(med["prebind --print=url -- sleep 10"], 3) + " ms",
                        "tini→echo " + ms(ref, 3) + " ms",
                        ratio(med["prebind --print=url -- sleep 10"], ref), "—", "—"])

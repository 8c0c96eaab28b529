"""7b. Reload under load: --reload=overlap against stop-then-start."""

import os

from harness import TOP, PYTHON, need, verdict
from sections.restart import measure


def bench(ctx, sec):
    """wrk load (a new connection per request) while prebind is sent
    SIGHUP every 0.5 s, against a server that needs 0.3 s to start and
    says READY=1 (tests/integration/servers/generation_http.py): with
    --reload=restart every reload makes clients wait for a start-up; with
    --reload=overlap the old server answers until the new one is ready.
    Target (issue 24): 0 failed, and p99 during reloads at most twice the
    p99 without."""
    wrk = need("wrk")
    server = os.path.join(TOP, "tests", "integration", "servers", "generation_http.py")
    seconds = 2 if ctx.smoke else 10
    rows, p99s = [], {}
    for key, label, mode, hup in (("none", "no reloads", "overlap", None),
                                  ("restart", "SIGHUP every 0.5 s, --reload=restart", "restart", 0.5),
                                  ("overlap", "SIGHUP every 0.5 s, --reload=overlap", "overlap", 0.5)):
        state = os.path.join(ctx.work, "reload-" + key)
        os.makedirs(state, exist_ok=True)
        reqs, failed, p99_ms, hups = measure(ctx, wrk, [ctx.prebind, "-q", "--print", "--ready",
                                                        "--reload=" + mode, "--", PYTHON, server, state,
                                                        "--start-delay", "0.3"], seconds, hup)
        p99s[key] = p99_ms
        rows.append([label + (" (%d SIGHUPs)" % hups if hup else ""), reqs, failed, "%.1f" % p99_ms])
    sec.table(["scenario", "requests", "failed (socket errors + non-2xx)", "p99 ms"], rows)
    sec.notes.append("wrk -t 2 -c 4 -d %ds --latency -H 'Connection: close' against "
                     "tests/integration/servers/generation_http.py --start-delay 0.3 (HTTP/1.0, READY=1 once "
                     "it accepts; finishes the request in hand on SIGTERM) under prebind --ready" % seconds)
    worst = max(r[2] for r in rows)
    ratio = p99s["overlap"] / p99s["none"] if p99s["none"] else float("nan")
    sec.summary.append(["reload under wrk load (--reload=overlap): failed", str(worst), "", "", "0",
                        verdict(worst == 0)])
    sec.summary.append(["reload under wrk load: p99 overlap / no reloads", "%.1f" % ratio, "", "", "<= 2",
                        verdict(ratio <= 2)])

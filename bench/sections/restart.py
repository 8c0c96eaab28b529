"""7. Restart under load."""

import os
import re
import signal
import subprocess
import time

from harness import TOP, PYTHON, spawn, reap, read_first_line, need, verdict


def measure(ctx, wrk, argv, seconds, hup_every=None, tick=None):
    """wrk (a new connection per request) for seconds against the server
    prebind argv publishes (--print), with SIGHUP to prebind every
    hup_every seconds if given (or tick() called instead, if given).
    Returns (requests, failed, p99 ms, ticks); failed counts socket
    errors and non-2xx answers."""
    r, w = os.pipe()
    pid = spawn(argv, stdout_fd=w)
    os.close(w)
    try:
        port = int(read_first_line(r, 10))
        stop = time.monotonic() + seconds
        load = subprocess.Popen([wrk, "-t", "2", "-c", "4", "-d", "%ds" % seconds, "--latency",
                                 "-H", "Connection: close", "http://127.0.0.1:%d/" % port],
                                stdout=subprocess.PIPE, text=True)
        hups = 0
        while hup_every and time.monotonic() < stop:
            time.sleep(hup_every)
            if tick:
                tick()
            else:
                os.kill(pid, signal.SIGHUP)
            hups += 1
        out, _ = load.communicate(timeout=seconds + 30)
    finally:
        os.close(r)
        reap(pid, 10, term=True)
    reqs = re.search(r"(\d+) requests in", out)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", out)
    failed = (sum(int(x) for x in errs.groups()) if errs else 0) + (int(non2xx.group(1)) if non2xx else 0)
    scale = {"us": 0.001, "ms": 1, "s": 1000}
    p99_ms = float(p99.group(1)) * scale[p99.group(2)] if p99 else float("nan")
    return int(reqs.group(1)) if reqs else 0, failed, p99_ms, hups


def bench(ctx, sec):
    """wrk load (a new connection per request) while COMMAND is restarted
    repeatedly: by crashing on its own every N answers (--restart=on-failure)
    and by SIGHUP from outside (restart on demand). Target: 0 failed."""
    wrk = need("wrk")
    server = os.path.join(TOP, "tests", "integration", "servers", "restartable_http.py")
    seconds = 2 if ctx.smoke else 10
    rows = []
    for label, extra, hup in (("no restarts", [], False),
                              ("crash every 200 answers, --restart=on-failure", ["--crash-after", "200"], False),
                              ("SIGHUP every 0.5 s (restart on demand)", [], True)):
        reqs, failed, p99_ms, hups = measure(ctx, wrk, [ctx.prebind, "-q", "--print", "--restart=on-failure",
                                                        "--restart-limit=0", "--restart-delay=0", "--", PYTHON,
                                                        server] + extra, seconds, 0.5 if hup else None)
        rows.append([label + (" (%d SIGHUPs)" % hups if hup else ""), reqs, failed, "%.1f" % p99_ms])
    sec.table(["scenario", "requests", "failed (socket errors + non-2xx)", "p99 ms"], rows)
    sec.notes.append("wrk -t 2 -c 4 -d %ds --latency -H 'Connection: close' against "
                     "tests/integration/servers/restartable_http.py (HTTP/1.0, finishes the request in hand "
                     "on SIGTERM) under prebind --restart" % seconds)
    worst = max(r[2] for r in rows)
    sec.summary.append(["restart under wrk load: failed", str(worst), "", "", "0", verdict(worst == 0)])

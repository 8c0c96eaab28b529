"""7b. Reload under load: --reload=overlap against stop-then-start."""

import http.client
import os
import signal
import socket
import time

from harness import TOP, PYTHON, median, read_first_line, reap, spawn, need, verdict
from sections.restart import measure


def generation_of(port):
    """(generation, seconds) of one GET on a new connection; (None, s) on
    a failure."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/")
        body = c.getresponse().read().decode()
        c.close()
        return int(body.split()[0].split("=")[1]), time.monotonic() - t0
    except (OSError, ValueError, IndexError, http.client.HTTPException):
        return None, time.monotonic() - t0


def save_to_answer(ctx, server, mode, saves):
    """--watch: the time from a save to the first answer of the new
    generation, and the slowest single request meanwhile (a client
    asking in a loop, a new connection each)."""
    tree, state = os.path.join(ctx.work, "watch-" + mode), os.path.join(ctx.work, "watch-state-" + mode)
    os.makedirs(tree, exist_ok=True)
    os.makedirs(state, exist_ok=True)
    r, w = os.pipe()
    pid = spawn([ctx.prebind, "-q", "--print", "--ready", "--reload=" + mode, "--watch=" + tree, "--", PYTHON,
                 server, state, "--start-delay", "0.3"], stdout_fd=w)
    os.close(w)
    times, stall, failed = [], 0.0, 0
    try:
        port = int(read_first_line(r, 10))
        current, _ = generation_of(port)
        for n in range(saves):
            with open(os.path.join(tree, "app.py"), "w") as f:
                f.write("v = %d\n" % n)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                g, took = generation_of(port)
                stall = max(stall, took)
                failed += g is None
                if g is not None and g > current:
                    times.append(time.monotonic() - t0)
                    current = g
                    break
            time.sleep(0.3)
    finally:
        os.close(r)
        reap(pid, 10, term=True)
    return times, stall, failed


class StartedBeside:
    """The control: every tick, the same server started beside on a socket
    of its own that no client uses (what a new generation costs the machine
    to start, without any reload), the one started a tick before stopped."""

    def __init__(self, ctx, server):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.state = os.path.join(ctx.work, "reload-beside")
        os.makedirs(self.state, exist_ok=True)
        self.server, self.pids = server, []

    def __call__(self):
        if self.pids:
            os.kill(self.pids[-1], signal.SIGTERM)
        self.pids.append(spawn([PYTHON, self.server, self.state, "--start-delay", "0.3"], fd3=self.sock.fileno()))

    def close(self):
        for pid in self.pids:
            reap(pid, 10, term=True)
        self.sock.close()


def bench(ctx, sec):
    """wrk load (a new connection per request) while prebind is sent
    SIGHUP every 0.5 s, against a server that needs 0.3 s to start and
    says READY=1 (tests/integration/servers/generation_http.py): with
    --reload=restart every reload makes clients wait for a start-up; with
    --reload=overlap the old server answers until the new one is ready.
    The control starts the same server beside every 0.5 s without any
    reload: on two cores both busy with the load, its start-up CPU alone
    raises the p99. Target: 0 failed, and p99 during overlapping reloads
    at most twice the p99 of the control (what the reload itself adds);
    the ratio to no reloads at all is shown beside."""
    wrk = need("wrk")
    server = os.path.join(TOP, "tests", "integration", "servers", "generation_http.py")
    seconds = 2 if ctx.smoke else 10
    rows, p99s = [], {}
    starter = os.path.join(TOP, "bench", "starter_by_hand")
    beside = StartedBeside(ctx, server)
    for key, label, mode, hup in (("none", "no reloads", "overlap", None),
                                  ("beside", "no reloads, the same server started beside every 0.5 s", "overlap",
                                   0.5),
                                  ("restart", "SIGHUP every 0.5 s, --reload=restart", "restart", 0.5),
                                  ("overlap", "SIGHUP every 0.5 s, --reload=overlap", "overlap", 0.5),
                                  ("starter", "SIGHUP every 0.5 s, Server::Starter by hand (start the new one, "
                                   "wait 1 s, stop the old one)", None, 0.5)):
        state = os.path.join(ctx.work, "reload-" + key)
        os.makedirs(state, exist_ok=True)
        if mode:
            argv = [ctx.prebind, "-q", "--print", "--ready", "--reload=" + mode, "--"]
        else:
            argv = [PYTHON, starter, "1"]
        try:
            reqs, failed, p99_ms, hups = measure(ctx, wrk, argv + [PYTHON, server, state, "--start-delay", "0.3"],
                                                 seconds, hup, beside if key == "beside" else None)
        finally:
            if key == "beside":
                beside.close()
        p99s[key] = p99_ms
        what = "starts" if key == "beside" else "SIGHUPs"
        rows.append([label + (" (%d %s)" % (hups, what) if hup else ""), reqs, failed, "%.1f" % p99_ms])
    sec.table(["scenario", "requests", "failed (socket errors + non-2xx)", "p99 ms"], rows)
    sec.notes.append("wrk -t 2 -c 4 -d %ds --latency -H 'Connection: close' against "
                     "tests/integration/servers/generation_http.py --start-delay 0.3 (HTTP/1.0, READY=1 once "
                     "it accepts; finishes the request in hand on SIGTERM) under prebind --ready" % seconds)
    sec.notes.append("Server::Starter by hand: bench/starter_by_hand holds the socket and on SIGHUP starts the "
                     "next generation on it, waits a fixed 1 s (Server::Starter's --interval) and SIGTERMs the "
                     "old one, with no readiness check")
    saves = 3 if ctx.smoke else 10
    for mode in ("restart", "overlap"):
        times, stall, failed = save_to_answer(ctx, server, mode, saves)
        sec.notes.append("--watch --reload=%s, %d saves of one file (write in place, --watch-delay 100ms): the new "
                         "code answered %d, a median %s ms after the save; the slowest request meanwhile took "
                         "%.0f ms; %d failed (a client asking in a loop, a new connection per request)"
                         % (mode, saves, len(times), "%.0f" % (median(times) * 1000) if times else "-",
                            stall * 1000, failed))
    worst = max(r[2] for r in rows)
    ratio = p99s["overlap"] / p99s["beside"] if p99s["beside"] else float("nan")
    raw = p99s["overlap"] / p99s["none"] if p99s["none"] else float("nan")
    sec.notes.append("p99 with overlapping reloads is %.1f× the p99 without any reload, and %.1f× the p99 with the "
                     "same server only started beside every 0.5 s: the new generation's own start-up CPU "
                     "accounts for the rest" % (raw, ratio))
    sec.summary.append(["reload under wrk load (--reload=overlap): failed", str(worst), "", "", "0",
                        verdict(worst == 0)])
    sec.summary.append(["reload under wrk load: p99 overlap / the same server started beside", "%.1f" % ratio,
                        "", "", "<= 2", verdict(ratio <= 2)])

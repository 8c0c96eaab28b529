"""5. Time to first response: the uvicorn fixtures."""

import socket
import time

from harness import (HERE, PYTHON, BenchError, reap, run, need, median, pct, ms, ratio, verdict, start_fixture,
                     start_published)


def http_get(port, timeout):
    """One GET /, the whole answer; raises OSError (refused...) or BenchError."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        c.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        c.close()
    if not data.startswith(b"HTTP/1.1 200") or not data.endswith(b"hello\n"):
        raise BenchError("unexpected answer %r" % data[:80])
    return data


UVICORN_ARGS = ["-m", "uvicorn", "--app-dir", HERE, "--lifespan", "off",
                "--log-level", "warning", "--no-access-log"]


def fixture_prebind(ctx, timeout):
    """The README's fixture: --port-fd pipe, read the URL, GET at once."""
    t0 = time.perf_counter()
    p, line = start_published(ctx, ["--format=url"], [PYTHON] + UVICORN_ARGS + ["--fd", "3", "asgi_hello:app"],
                              timeout)
    port = int(line.rsplit(b":", 1)[1])
    http_get(port, timeout)          # no polling: the socket already listens
    t1 = time.perf_counter()
    return p, (t1 - t0) * 1000, 0


def fixture_pickport(ctx, timeout, interval=0.05):
    """The old pattern: bind port 0, read it, close it, start uvicorn --port,
    poll every 50 ms until it answers."""
    t0 = time.perf_counter()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = start_fixture([PYTHON] + UVICORN_ARGS + ["--host", "127.0.0.1", "--port", str(port), "asgi_hello:app"])
    deadline = time.monotonic() + timeout
    polls = 0
    while True:
        polls += 1
        try:
            http_get(port, timeout)
            break
        except (ConnectionRefusedError, ConnectionResetError):
            if p.poll() is not None or time.monotonic() > deadline:
                raise BenchError("uvicorn on port %d never answered (exit %s)" % (port, p.poll()))
            time.sleep(interval)
    t1 = time.perf_counter()
    return p, (t1 - t0) * 1000, polls


def bench(ctx, sec):
    """A pytest-style fixture from start to the first complete HTTP answer:
    uvicorn through prebind (--fd 3, connect at once) against pick-a-port +
    `uvicorn --port` + polling every 50 ms.  Same app, same flags, Popen for
    both; run in pairs (order alternating), so that each pair sees the same
    load on the shared machine; teardown (SIGTERM, bounded) not timed.
    uvicorn's own start-up (~0.1-0.9 s here) varies far more than the
    difference, hence the paired figures."""
    need("python3-uvicorn")
    n = 2 if ctx.smoke else 40
    warm = 0 if ctx.smoke else 2
    res = {"prebind": [], "pickport": []}
    diffs = []
    polls = []
    deadline = time.monotonic() + (30 if ctx.smoke else 150)
    for i in range(warm + n):
        if time.monotonic() > deadline:
            sec.notes.append("time budget reached after %d pairs" % max(0, i - warm))
            break
        order = [("prebind", fixture_prebind), ("pickport", fixture_pickport)]
        if i % 2:
            order.reverse()
        pair = {}
        for name, fx in order:
            p, t, k = fx(ctx, 20)
            code = reap(p.pid, 10, term=True)
            p.returncode = code      # reaped here, not by Popen
            pair[name] = t
            if name == "pickport":
                pair["polls"] = k
        if i >= warm:
            res["prebind"].append(pair["prebind"])
            res["pickport"].append(pair["pickport"])
            polls.append(pair["polls"])
            diffs.append(pair["pickport"] - pair["prebind"])
    a, b = median(res["prebind"]), median(res["pickport"])
    faster = sum(1 for d in diffs if d > 0)

    def row(label, xs, vs):
        return [label, len(xs), ms(median(xs), 1), ms(min(xs or [float("nan")]), 1),
                ms(pct(xs, 90), 1), vs]
    sec.table(["fixture", "runs", "median ms", "min ms", "p90 ms", "vs prebind (medians)"],
              [row("prebind `--port-fd` + `uvicorn --fd 3`, GET at once", res["prebind"], "1.00×"),
               row("pick a port + `uvicorn --port`, poll every 50 ms", res["pickport"], ratio(b, a))])
    uv = run([PYTHON, "-c", "import uvicorn; print(uvicorn.__version__)"], 30).stdout.strip()
    sec.notes.append("Paired (the two fixtures back to back, order alternating): pick-a-port minus prebind "
                     "median %s ms (p10 %s, p90 %s); prebind faster in %d of %d pairs."
                     % (ms(median(diffs), 1), ms(pct(diffs, 10), 1), ms(pct(diffs, 90), 1), faster, len(diffs)))
    sec.notes.append("uvicorn %s (`%s -m uvicorn --lifespan off --log-level warning --no-access-log`), "
                     "app bench/asgi_hello.py, both under `timeout 60`; a run ends when the whole 200 answer is read; "
                     "median polls per pick-a-port run: %s; %d warm-up pairs."
                     % (uv, PYTHON, ms(median(polls), 0), warm))
    ctx.results["ttfr"] = (a, b, median(diffs))
    sec.summary.append(["fixture: start → first response", ms(a, 1) + " ms", "pick+poll " + ms(b, 1) + " ms",
                        ratio(a, b), "< 1.00×", verdict(a < b) + " (paired: %s ms saved, %d/%d pairs)"
                        % (ms(median(diffs), 1), faster, len(diffs))])

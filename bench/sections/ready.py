"""9. Readiness of servers that do not speak sd_notify."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

from harness import (ENV, Missing, BenchError, reap, which, need, median, ms, ratio, verdict, start_fixture,
                     start_published)


PG_BIN = "/usr/lib/postgresql/15/bin"
AS_POSTGRES = ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]


def shared_dir(owner=None):
    """A directory another user can reach (the work dir is 0700)."""
    d = tempfile.mkdtemp(prefix="prebind-bench-ready-", dir="/tmp")
    os.chmod(d, 0o755)
    if owner:
        shutil.chown(d, owner, owner)
    return d


def redis_ping(d, timeout):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(os.path.join(d, "redis.sock"))
        s.sendall(b"PING\r\n")
        data = s.recv(64)
    finally:
        s.close()
    if not data.startswith(b"+PONG"):
        raise BenchError("redis answered %r" % data[:40])


def pg_query(d, timeout):
    r = subprocess.run(["psql", "-h", d, "-p", "5432", "-U", "postgres", "-Atc", "select 1"], env=ENV,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 or r.stdout.strip() != "1":
        raise BenchError("psql: %s" % r.stderr.strip()[:200])


def ready_servers(d):
    redis = [which("redis-server"), "--port", "0", "--unixsocket", os.path.join(d, "redis.sock"),
             "--save", "", "--appendonly", "no", "--dir", d]
    pg = AS_POSTGRES + [PG_BIN + "/postgres", "-D", os.path.join(d, "data"), "-k", d, "-p", "5432",
                        "-c", "listen_addresses=", "-c", "fsync=off"]
    return {"redis": redis, "postgres": pg}


def first_query_prebind(ctx, argv, conditions, query, d, timeout=30):
    """prebind --ready-*: wait for the --port-fd pipe's EOF, then one query
    (no retry: it must work)."""
    t0 = time.perf_counter()
    p, _ = start_published(ctx, ["-q"] + conditions, argv, timeout)
    query(d, timeout)
    return p, (time.perf_counter() - t0) * 1000


def first_query_poll(ctx, argv, check, query, d, timeout=30, interval=0.05):
    """The loop a fixture writes by hand: try, sleep 50 ms, try again."""
    t0 = time.perf_counter()
    p = start_fixture(argv)
    deadline = time.monotonic() + timeout
    while True:
        try:
            check(d, timeout)
            break
        except (OSError, BenchError, subprocess.SubprocessError):
            if p.poll() is not None or time.monotonic() > deadline:
                raise BenchError("%s never answered (exit %s)" % (argv[0], p.poll()))
            time.sleep(interval)
    query(d, timeout)
    return p, (time.perf_counter() - t0) * 1000


def pg_isready(d, timeout):
    r = subprocess.run(["pg_isready", "-q", "-h", d, "-p", "5432"], env=ENV, timeout=timeout)
    if r.returncode != 0:
        raise BenchError("not ready")


def bench(ctx, sec):
    """Start to the first successful query of Redis and PostgreSQL: prebind
    --ready-log / --ready-exec (publish, then query once) against the loop
    a fixture writes by hand (query, sleep 50 ms, again). Paired runs, order
    alternating; teardown not timed. Both servers bind their own port, so
    they serve on a unix socket in a directory of the run's own (with
    --intercept they could take prebind's socket instead)."""
    need("redis-server", "redis-cli", "psql", "pg_isready", "setpriv")
    if not os.path.exists(PG_BIN + "/postgres"):
        raise Missing("postgresql-15")
    n = 1 if ctx.smoke else 10
    d = shared_dir("postgres")
    try:
        r = subprocess.run(AS_POSTGRES + [PG_BIN + "/initdb", "-D", os.path.join(d, "data"), "--auth=trust",
                                          "-U", "postgres", "--no-sync"], env=ENV, capture_output=True, timeout=120)
        if r.returncode != 0:
            raise BenchError("initdb: %s" % r.stderr.decode()[-200:])
        servers = ready_servers(d)
        cases = [
            ("Redis 7, `--ready-log`", "redis", ["--ready-log=[Rr]eady to accept connections"], redis_ping,
             redis_ping),
            ("Redis 7, `--ready-exec='redis-cli … ping'`", "redis",
             ["--ready-exec=redis-cli -s %s/redis.sock ping | grep -q PONG" % d], redis_ping, redis_ping),
            ("PostgreSQL 15, `--ready-log`", "postgres",
             ["--ready-log=database system is ready to accept connections"], pg_query, pg_isready),
            ("PostgreSQL 15, `--ready-exec='pg_isready …'`", "postgres",
             ["--ready-exec=pg_isready -q -h %s -p 5432" % d], pg_query, pg_isready),
        ]
        rows = []
        for label, name, cond, query, check in cases:
            a, b, diffs = [], [], []
            for i in range(n):
                pair = {}
                order = ["prebind", "poll"] if i % 2 == 0 else ["poll", "prebind"]
                for which_one in order:
                    if which_one == "prebind":
                        p, t = first_query_prebind(ctx, servers[name], cond, query, d)
                    else:
                        p, t = first_query_poll(ctx, servers[name], check, query, d)
                    reap(p.pid, 20, term=True)
                    p.returncode = 0
                    pair[which_one] = t
                a.append(pair["prebind"])
                b.append(pair["poll"])
                diffs.append(pair["poll"] - pair["prebind"])
            rows.append([label, n, ms(median(a), 1), ms(median(b), 1), ratio(median(a), median(b)),
                         ms(median(diffs), 1)])
            ctx.results.setdefault("ready", []).append((label, median(a), median(b)))
        sec.table(["server, condition", "pairs", "prebind: start → first query, median ms",
                   "hand poll (50 ms), median ms", "prebind / poll", "paired saving, median ms"], rows)
        sec.notes.append("Each pair starts the same server twice on the same data directory, once through "
                         "`prebind -q --port-fd=N --ready-…` (read to EOF, then one query, which must work) and "
                         "once alone with a loop that tries the query's readiness check (Redis: PING over the unix "
                         "socket; PostgreSQL: `pg_isready`) every 50 ms, then the query; order alternating. "
                         "Query: Redis PING from Python, PostgreSQL `psql -c 'select 1'`. Teardown (SIGTERM, "
                         "bounded) not timed.")
        # The target is for --ready-log, the way without polling; an exec
        # probe forks per attempt, which an in-process loop does not.
        worst = max(r_[1] / r_[2] for r_ in ctx.results["ready"] if "--ready-log" in r_[0])
        sec.summary.append(["start → first query, `--ready-log` (Redis, PostgreSQL)",
                            "worst prebind/poll %.2f×" % worst, "", "", "≤ 1.00×", verdict(worst <= 1.0)])
    finally:
        shutil.rmtree(d, ignore_errors=True)

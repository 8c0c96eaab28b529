"""13. --share: attaching to a shared server, and a suite on one shared PostgreSQL."""

import os
import shutil
import tempfile
import time

from harness import (BenchError, Missing, spawn, reap, read_first_line, first_line_rounds, median, pct, ms, ratio,
                     verdict, need, run, ENV, PYTHON, TOP)


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
    if ctx.smoke:
        # Two pytest -n 8 runs and eight PostgreSQLs: not in --smoke's budget.
        sec.notes.append("The suite comparison (80 tests, shared PostgreSQL against one per worker) runs in "
                         "the full run only.")
        return
    try:
        suite_rows(ctx, sec, env)
    except Missing as e:
        sec.notes.append("The suite comparison needs %s: not run." % e)


PG_BIN = "/usr/lib/postgresql/15/bin"
AS_POSTGRES = ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]

# The suite: a session fixture per xdist worker, then 80 tests that each
# run one query. BENCH_MODE=shared: every worker's fixture is the same
# Server(share="pg"); per-worker: each copies the template cluster and
# starts its own.
SUITE_CONFTEST = '''
import os, shutil, subprocess, tempfile
import pytest
from pytest_prebind import Server

PG = [*%(as_postgres)r, %(postgres)r]

@pytest.fixture(scope="session")
def pgdir():
    if os.environ["BENCH_MODE"] == "shared":
        d = os.environ["BENCH_PGDATA"]
        options = {"share": "pg"}
    else:
        d = tempfile.mkdtemp(prefix="pbw-", dir="/tmp")
        os.chmod(d, 0o755)
        subprocess.run(["cp", "-a", os.path.join(os.environ["BENCH_PGDATA"], "data"), d], check=True)
        shutil.chown(d, "postgres", "postgres")
        options = {}
    command = PG + ["-D", os.path.join(d, "data"), "-k", d, "-p", "5432", "-c", "listen_addresses=",
                    "-c", "fsync=off"]
    with Server(command, ready_log="database system is ready to accept connections", timeout=60, **options):
        yield d
    if not options:
        shutil.rmtree(d, ignore_errors=True)
'''

SUITE_TESTS = '''
import subprocess
import pytest

@pytest.mark.parametrize("i", range(80))
def test_query(pgdir, i):
    r = subprocess.run(["psql", "-h", pgdir, "-p", "5432", "-U", "postgres", "-Atc", "select 1"],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "1", r.stderr
'''


def suite_round(ctx, d, env, mode):
    """One `pytest -n 8` run of the suite; its wall time in seconds."""
    t0 = time.perf_counter()
    r = run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "8", os.path.join(d, "suite")],
            timeout=300, env=dict(env, BENCH_MODE=mode))
    t = time.perf_counter() - t0
    if r.returncode != 0 or "80 passed" not in r.stdout:
        raise BenchError("suite (%s): exit %d: %s" % (mode, r.returncode, (r.stdout + r.stderr)[-400:]))
    return t


def suite_rows(ctx, sec, env):
    """80 tests on 8 xdist workers: one shared PostgreSQL against one per
    worker (each a copy of one initdb'd cluster), wall time of the run."""
    need("psql", "setpriv")
    if not os.path.exists(PG_BIN + "/postgres"):
        raise Missing("postgresql-15")
    try:
        import xdist  # noqa: F401  (the suite runs in this interpreter)
    except ImportError:
        raise Missing("python3-pytest-xdist")
    d = tempfile.mkdtemp(prefix="pbs-", dir="/tmp")
    os.chmod(d, 0o755)
    shutil.chown(d, "postgres", "postgres")
    try:
        r = run(AS_POSTGRES + [PG_BIN + "/initdb", "-D", os.path.join(d, "data"), "--auth=trust", "-U", "postgres",
                               "--no-sync"], timeout=120)
        if r.returncode != 0:
            raise BenchError("initdb: %s" % r.stderr[-200:])
        os.mkdir(os.path.join(d, "suite"))
        with open(os.path.join(d, "suite", "conftest.py"), "w") as f:
            f.write(SUITE_CONFTEST % {"as_postgres": AS_POSTGRES, "postgres": PG_BIN + "/postgres"})
        with open(os.path.join(d, "suite", "test_suite.py"), "w") as f:
            f.write(SUITE_TESTS)
        env = dict(env, PYTHONPATH=os.path.join(TOP, "python", "src"), PREBIND=ctx.prebind, BENCH_PGDATA=d)
        rounds = 1 if ctx.smoke else 3
        times = {"shared": [], "per-worker": []}
        for i in range(rounds):
            for mode in (["shared", "per-worker"] if i % 2 == 0 else ["per-worker", "shared"]):
                times[mode].append(suite_round(ctx, d, env, mode))
                if mode == "shared":
                    # The next round starts it anew: wait for this one to go.
                    deadline = time.monotonic() + 30
                    while run([ctx.prebind, "--share=pg", "--status"], timeout=10, env=env).returncode == 0:
                        if time.monotonic() > deadline:
                            raise BenchError("the shared PostgreSQL did not stop after the run")
                        time.sleep(0.1)
        shared, per_worker = median(times["shared"]), median(times["per-worker"])
        sec.table(["80 tests, `pytest -n 8`", "rounds", "median wall time s", "vs per worker"], [
            ["one PostgreSQL per worker (8)", rounds, "%.2f" % per_worker, "1.00×"],
            ["one shared PostgreSQL (`share=\"pg\"`)", rounds, "%.2f" % shared, ratio(shared, per_worker)],
        ])
        sec.notes.append("Each test runs `psql -Atc 'select 1'` on the unix socket; the session fixture is "
                         "pytest_prebind.Server(..., ready_log=...), with share=\"pg\" in the shared rows; per "
                         "worker, each fixture first copies the one initdb'd cluster (cp -a). Rounds alternate; "
                         "the shared server is gone (--status: 3) before the next round.")
        sec.summary.append(["80 tests on 8 workers, shared PostgreSQL vs per worker", "%.2f s" % shared,
                            "per worker %.2f s" % per_worker, ratio(shared, per_worker), "< 1.00×",
                            verdict(shared < per_worker)])
    finally:
        shutil.rmtree(d, ignore_errors=True)

"""Real servers that do not speak sd_notify, started through prebind's
--ready-* conditions: the first query runs the moment prebind publishes,
with no retry loop, in parallel instances. Redis and PostgreSQL bind
their own ports (no LISTEN_FDS), so here they serve on a unix socket in a
directory of the test's own, beside the socket prebind holds."""

import concurrent.futures
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import TIMEOUT, public_interposer_env, wait_for
from test_ready_probes import published, start_published

PG_BIN = "/usr/lib/postgresql/15/bin"
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]


def private_dir(owner=None):
    """A directory under /tmp that another user can reach (0755 parents)."""
    d = tempfile.mkdtemp(prefix="prebind-ready-", dir="/tmp")
    os.chmod(d, 0o755)
    if owner:
        shutil.chown(d, owner, owner)
    return d


# ---- Redis ---------------------------------------------------------------------

def redis_args(d):
    return ["redis-server", "--port", "0", "--unixsocket", f"{d}/redis.sock", "--save", "", "--appendonly", "no",
            "--dir", d]


def redis_cli(d, *args):
    return subprocess.run(["redis-cli", "-s", f"{d}/redis.sock"] + list(args), capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.mark.parametrize("condition", ["exec", "log"])
def test_redis_first_query_at_publication_in_parallel(start, condition):
    dirs = [private_dir() for _ in range(3)]
    try:
        def one(d):
            ready = {"exec": f"--ready-exec=redis-cli -s {d}/redis.sock ping | grep -q PONG",
                     # 7.0 says "Ready to accept connections" for TCP, "ready to
                     # accept connections at PATH" for a unix socket only.
                     "log": "--ready-log=[Rr]eady to accept connections"}[condition]
            p, r = start_published(start, ["-q", ready, "--"] + redis_args(d))
            assert published(r, timeout=60).strip().isdigit()
            # No retry: the very first command works.
            out = redis_cli(d, "set", "k", os.path.basename(d))
            assert out.stdout.strip() == "OK", out.stderr
            assert redis_cli(d, "get", "k").stdout.strip() == os.path.basename(d)
            return p

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            procs = list(pool.map(one, dirs))
        for p in procs:
            assert p.stop() == 0
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def test_redis_restarted_is_waited_for_again(start):
    d = private_dir()
    try:
        with open(f"{d}/prebind.log", "w") as err:
            p, r = start_published(start, ["-v", "--restart=always", "--restart-delay=0",
                                           f"--ready-exec=redis-cli -s {d}/redis.sock ping | grep -q PONG", "--"]
                                   + redis_args(d), stderr=err)
            assert published(r, timeout=60).strip().isdigit()
            pid = int(redis_cli(d, "info", "server").stdout.split("process_id:")[1].split()[0])
            os.kill(pid, signal.SIGKILL)
            log = lambda: open(f"{d}/prebind.log").read()  # noqa: E731
            assert wait_for(lambda: log().count("ready: --ready-exec exited 0") == 2), log()
            assert redis_cli(d, "ping").stdout.strip() == "PONG"
            p.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- PostgreSQL ------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg_cluster():
    """One initdb for the module (a few seconds), copied per test."""
    if not os.path.exists(f"{PG_BIN}/postgres"):
        pytest.fail("postgresql-15 is not installed (.ci/run installs it)")
    d = private_dir("postgres")
    subprocess.run(AS_POSTGRES + [f"{PG_BIN}/initdb", "-D", f"{d}/data", "--auth=trust", "-U", "postgres",
                                  "--no-sync"], check=True, capture_output=True, timeout=120)
    yield f"{d}/data"
    shutil.rmtree(d, ignore_errors=True)


def pg_copy(cluster):
    d = private_dir("postgres")
    subprocess.run(["cp", "-a", cluster, f"{d}/data"], check=True, timeout=TIMEOUT)
    return d


def postgres_args(d):
    return AS_POSTGRES + [f"{PG_BIN}/postgres", "-D", f"{d}/data", "-k", d, "-p", "5432", "-c",
                          "listen_addresses=", "-c", "fsync=off"]


def psql(d, sql):
    return subprocess.run(["psql", "-h", d, "-p", "5432", "-U", "postgres", "-Atc", sql], capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("condition", ["log", "exec", "both"])
def test_postgres_first_query_at_publication(start, pg_cluster, condition):
    d = pg_copy(pg_cluster)
    try:
        ready = {"log": ["--ready-log=database system is ready to accept connections"],
                 "exec": [f"--ready-exec=pg_isready -q -h {d} -p 5432"]}
        ready["both"] = ready["log"] + ready["exec"]
        p, r = start_published(start, ["-q"] + ready[condition] + ["--"] + postgres_args(d))
        assert published(r, timeout=60).strip().isdigit(), p.stderr_text()
        out = psql(d, "select 40 + 2")
        assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr
        assert p.stop(signal.SIGINT) == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_postgres_that_cannot_start_says_why(pg_cluster):
    d = pg_copy(pg_cluster)
    try:
        with open(f"{d}/data/postgresql.conf", "a") as f:
            f.write("shared_buffers = 'lots'\n")
        out = subprocess.run([__import__("conftest").PREBIND, "--ready-log=ready to accept connections", "--"]
                             + postgres_args(d), capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 1
        assert "exited before it was ready, with status 1: wrote no line that matches" in out.stderr
        assert "prebind: > " in out.stderr and "shared_buffers" in out.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- with --intercept: the servers take prebind's own TCP socket -------------------

@pytest.mark.parametrize("condition", ["exec", "log"])
def test_redis_on_prebinds_port_through_intercept(start, condition):
    d = private_dir()
    try:
        ready = {"exec": "--ready-exec=redis-cli -p {port} ping | grep -q PONG",
                 "log": "--ready-log=Ready to accept connections"}[condition]
        p, r = start_published(start, ["-q", "--intercept=6379", ready, "--", "redis-server", "--port", "6379",
                                       "--save", "", "--appendonly", "no", "--dir", d])
        port = published(r, timeout=60).strip()
        assert port.isdigit()
        out = subprocess.run(["redis-cli", "-p", port, "set", "k", "v"], capture_output=True, text=True,
                             timeout=TIMEOUT)
        assert out.stdout.strip() == "OK", out.stderr
        assert p.stop() == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_postgres_on_prebinds_port_through_intercept(start, pg_cluster):
    d = pg_copy(pg_cluster)
    try:
        p, r = start_published(start, ["-q", "--intercept=5432", "--ready-exec=pg_isready -q -h 127.0.0.1 -p {port}",
                                       "--ready-log=database system is ready to accept connections", "--"]
                               + AS_POSTGRES + [f"{PG_BIN}/postgres", "-D", f"{d}/data", "-k", d, "-p", "5432",
                                                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                               env=public_interposer_env())
        port = published(r, timeout=60).strip()
        assert port.isdigit(), p.stderr_text()
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-Atc", "select 6 * 7"],
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr
        assert p.stop(signal.SIGINT) == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)

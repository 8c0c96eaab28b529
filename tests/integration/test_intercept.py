"""--intercept: a server that binds its own port gets prebind's socket
through libprebind-intercept.so: through wrappers that close and reuse
fds, in both families, for named sockets, across restarts under load; the
programs it cannot reach are refused at once, and a claim that never comes
is 124 with the reason, in one line. Real servers: test_intercept_servers.py."""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import PYTHON, TIMEOUT, curl, http_get, run, server, wait_for
from test_restart import Load, command_pid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (setpriv to postgres, memcached -u)")


def which(name, *more):
    for n in (name,) + more:
        path = shutil.which(n, path="/usr/sbin:/usr/bin:/sbin:/bin:" + os.environ.get("PATH", ""))
        if path:
            return path
    pytest.skip(f"{name} is not installed (.ci/run installs it)")


def start_intercepted(start, tmp_path, args, command, log_name="server.log", timeout=TIMEOUT, **kwargs):
    """prebind --port-file … --intercept… -- command, its output (and
    prebind's) in a log file; returns (Prebind, port, log path) once the
    port is published, i.e. once the server claimed the socket."""
    port_file = tmp_path / (log_name + ".port")
    log = tmp_path / log_name
    with open(log, "wb") as out:
        p = start([f"--port-file={port_file}"] + args + ["--"] + command, stdout=out, stderr=subprocess.STDOUT,
                  **kwargs)
    published = wait_for(lambda: port_file.exists() or p.proc.poll() is not None, timeout=timeout)
    assert published and port_file.exists(), f"not published; exit {p.proc.poll()}; log:\n{log.read_text()}"
    text = port_file.read_text()
    return p, (int(text.split()[0]) if text.split()[0].isdigit() else text), log


def error_lines(log, *words):
    words = words or ("error", "fail", "could not", "accept4", "unavailable", "emerg", "crit")
    return [line for line in log.read_text(errors="replace").splitlines()
            if any(w in line.lower() for w in words)]


# ---- Python's http.server

def test_python_http_server_8000(start, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "token.txt").write_text("mine\n")
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000"],
                                     [PYTHON, "-m", "http.server", "8000", "--directory", str(site)])
    assert curl(f"http://127.0.0.1:{port}/token.txt") == "mine\n"
    p.stop()


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


def test_server_that_takes_listen_fds_when_there_are_any_is_served_and_published(start, tmp_path):
    # A server that serves on inherited sockets when it finds any
    # (sd_listen_fds(), go-systemd) and binds 8000 otherwise. The
    # intercepted socket is not in LISTEN_FDS: the server binds, claims,
    # and is published. (It used to find the socket in LISTEN_FDS, serve
    # on it without a bind(), and prebind waited for a claim: 124.)
    p, port, log = start_intercepted(start, tmp_path, ["--intercept=8000", "--ready-timeout=10s"],
                                     [PYTHON, server("own_port_http.py"), "--port", "8000", "--sd-listen-fds"])
    status, body = http_get(f"http://127.0.0.1:{port}")
    assert status == 200 and "via=bind" in body, body
    assert p.stop() == 0


def test_only_sockets_that_are_not_intercepted_are_in_listen_fds(tmp_path):
    out = run(["-l", "web=0", "-l", "admin=0", "--intercept=web=8000", "--ready-timeout=2s", "--", "sh", "-c",
               'echo "$LISTEN_FDS $LISTEN_FDNAMES"; exit 7'])
    assert out.returncode == 7, out.stderr
    assert out.stdout == "1 admin\n"
    out = run(["--intercept=8000", "--ready-timeout=2s", "--", "sh", "-c",
               'echo "${LISTEN_FDS-unset} ${LISTEN_PID-unset} ${LISTEN_FDNAMES-unset}"; exit 7'])
    assert out.returncode == 7, out.stderr
    assert out.stdout == "unset unset unset\n"


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
    # --group: the background server is stopped with the rest (it is not
    # COMMAND, which exec'd the second one).
    p, port, log = start_intercepted(start, tmp_path, ["--group", "-l", "a=127.0.0.1:0", "-l", "b=127.0.0.1:0",
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
    # The interposer's limit; seccomp (the default where the kernel has
    # it) serves static programs (test_seccomp.py).
    out = run(["--intercept-via=preload", "--intercept=8000", "--", str(exe)])
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and "is statically linked" in out.stderr, out.stderr
    assert not marker.exists()


@needs_root
def test_setuid_program_is_refused(tmp_path):
    exe = tmp_path / "suid-sh"
    shutil.copy("/bin/true", exe)
    os.chown(exe, 65534, 65534)
    os.chmod(exe, 0o4755)
    out = run(["--intercept-via=preload", "--intercept=8000", "--", str(exe)])
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
    out = run(["--intercept-via=preload", "--intercept=8000", "--ready-timeout=300ms", "--", "sleep", "30"])
    assert out.returncode == 124
    assert "did not claim port 8000/tcp (no bind() of a port reached the interposer; static and Go programs " \
        "bypass it with raw system calls, which --intercept-via=seccomp catches where the kernel allows it) " \
        "within 0.3s" in out.stderr, out.stderr


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
    (["--intercept=nosuch=80"], "--intercept=nosuch=80: no socket is named 'nosuch'"),
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


NOTIFY_AFTER_BIND = """
import os, socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 8000)); s.listen()
if sys.argv[1] == "notify":
    n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    addr = os.environ["NOTIFY_SOCKET"]
    n.sendto(b"READY=1", "\\0" + addr[1:] if addr.startswith("@") else addr)
time.sleep(30)
"""


def test_ready_and_intercept_both_must_hold(tmp_path):
    # Claimed, but no READY=1: not ready; the message names what is missing.
    out = run(["--ready=3s", "--intercept=8000", "--", PYTHON, "-c", NOTIFY_AFTER_BIND, "quiet"])
    assert out.returncode == 124
    assert "did not send READY=1 within 3.0s" in out.stderr and "claim" not in out.stderr, out.stderr


def test_ready_and_intercept_publish_once_both_came(start, tmp_path):
    p = start(["--print", "--ready", "--intercept=8000", "--", PYTHON, "-c", NOTIFY_AFTER_BIND, "notify"])
    port = int(p.readline())
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT):
        pass  # the server's listening socket (it never accepts: the handshake is enough)
    assert port != 8000


def test_users_ld_preload_is_kept_first(tmp_path):
    code = "import os; print(os.environ['LD_PRELOAD'])"
    lib = os.environ.get("PREBIND_INTERCEPT_LIBRARY", "")
    for args, env_value in ((["-E", "LD_PRELOAD=/nonexistent-a.so"], None), ([], "/nonexistent-b.so")):
        env = dict(os.environ, LD_PRELOAD=env_value) if env_value else None
        out = run(["-q", "--intercept-via=preload", "--intercept=8000"] + args + ["--", PYTHON, "-c", code],
                  env=env)
        first, _, last = out.stdout.strip().partition(":")
        assert first == (env_value or "/nonexistent-a.so"), out
        assert last.endswith("/libprebind-intercept.so") and (not lib or os.path.samefile(last, lib)), out

"""Servers started through prebind, reached with a real client.

    PREBIND=/path/to/prebind /usr/bin/python3 -m pytest -n auto
"""

import contextlib
import http.client
import os
import signal
import subprocess

import pytest

from conftest import (PYTHON, TIMEOUT, prebind_path, prebind_port_fd, prebind_print,
                      stdlib_command)


def get(url, path="/"):
    conn = http.client.HTTPConnection(url.split("://", 1)[1], timeout=TIMEOUT)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_stdlib_server(stdlib_server):
    status, body = get(stdlib_server.url, "/hello")
    assert status == 200
    # The answer comes from the very process prebind started, not from
    # whatever else might listen on a recycled port.
    assert body == f"stdlib pid={stdlib_server.child_pid} path=/hello\n"
    assert stdlib_server.stop() == 0  # SIGTERM, forwarded; the server exits 0


def test_uvicorn_fd_3(uvicorn_server):
    status, body = get(uvicorn_server.url, "/hello")
    assert status == 200
    assert body == f"uvicorn pid={uvicorn_server.child_pid} path=/hello\n"
    assert uvicorn_server.stop() == 0


def test_gunicorn_listen_fds(gunicorn_server):
    status, body = get(gunicorn_server.url, "/hello")
    assert status == 200
    # A worker answered; its parent is the gunicorn master that prebind
    # started (with no sockets, gunicorn would have bound 127.0.0.1:8000).
    assert body.startswith("gunicorn pid=")
    master = int(body.split("ppid=")[1].split()[0])
    assert os.readlink(f"/proc/{master}/exe") == os.path.realpath(PYTHON)
    assert gunicorn_server.stop() == 0
    # The server's stdout came after prebind's line, on the same pipe.
    assert "app_wsgi: GET /hello" in gunicorn_server.output()


def test_many_servers_at_once():
    # Eight servers started together, each on a port the kernel picked and
    # prebind kept: all different, each answering for itself.
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(prebind_port_fd(stdlib_command())) for _ in range(8)]
        assert len({s.port for s in servers}) == len(servers)
        for s in servers:
            assert get(s.url)[1] == f"stdlib pid={s.child_pid} path=/\n"


def test_stdlib_server_with_print():
    with prebind_print(stdlib_command()) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, body = get(server.url)
        assert status == 200 and body.startswith("stdlib pid=")


def test_several_named_sockets():
    with prebind_port_fd(stdlib_command(), "-l", "web=0", "-l", "admin=0") as server:
        # The stdlib server serves the first socket; the json has both.
        assert get(server.url)[0] == 200


@pytest.mark.parametrize("wrapper, works", [
    ("exec {server}", True),          # sh replaces itself: same pid
    ("{server}; exit $?", False),     # sh stays: the server is a grandchild
])
def test_shell_wrapper_needs_exec(wrapper, works):
    server = " ".join(stdlib_command())
    command = ["sh", "-c", wrapper.format(server=server)]
    if works:
        with prebind_port_fd(command) as s:
            assert get(s.url)[0] == 200
        return
    # Without exec, LISTEN_PID is sh's pid and the server refuses the socket
    # (as libsystemd, gunicorn and go-systemd would, silently).
    out = subprocess.run([prebind_path(), "-q", "--", *command], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 1
    assert "LISTEN_PID" in out.stderr


def test_killed_by_a_signal_is_128_plus_n():
    # A server without a SIGTERM handler dies of it; prebind passes that on
    # as a shell would (use --success-status=143 to call it success).
    with prebind_port_fd([PYTHON, "-c", "import signal; signal.pause()"]) as s:
        assert s.stop(signal.SIGTERM) == 128 + signal.SIGTERM

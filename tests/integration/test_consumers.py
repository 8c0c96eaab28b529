"""prebind --print=url -- <server>: every consumer answers a real request
on the socket it was given, and prebind passes its exit status on."""

import os
import signal

import pytest

from conftest import EXAMPLE_C_SERVER, PYTHON, SERVERS, curl, http_get, pid_alive, server, wait_for


def serve_and_get(start, command, extra=()):
    p = start(["--print=url", *extra, "--", *command])
    url = p.readline()
    assert url.startswith("http://127.0.0.1:"), url
    status, body = http_get(url, "/hello")
    assert status == 200, body
    return p, url, body


def test_c_example_server_with_sd_listen_fds_with_names(start):
    p, url, body = serve_and_get(start, [EXAMPLE_C_SERVER, "--expect", "web:stream"], ["-l", "web=0"])
    assert "name=web" in body and "fd=3" in body
    assert "hello from prebind example" in curl(url)
    assert p.stop() == 0


def test_c_example_server_rejects_wrong_names(start):
    # The server really checks: a name it does not expect makes it fail.
    p = start(["-q", "-l", "other=0", "--", EXAMPLE_C_SERVER, "--expect", "web:stream"])
    assert p.wait() == 2


def test_python_stdlib_socket_fileno_3(start):
    p, url, body = serve_and_get(start, [PYTHON, server("stdlib_http.py")])
    assert body.startswith("stdlib pid=")
    # The server is COMMAND itself (LISTEN_PID checked by the server).
    assert p.stop() == 128 + signal.SIGTERM  # its default action, passed on


def test_uvicorn_fd_3(start):
    p, url, body = serve_and_get(
        start, [PYTHON, "-m", "uvicorn", "--fd", "3", "--app-dir", SERVERS, "--log-level", "warning",
                "asgi_app:app"])
    assert body.startswith("uvicorn pid=")
    # uvicorn shuts down cleanly on SIGTERM, which prebind forwards.
    assert p.stop() == 0


def test_gunicorn_reads_listen_fds_natively(start):
    p, url, body = serve_and_get(
        start, [PYTHON, "-m", "gunicorn", "--chdir", SERVERS, "--workers", "1", "--log-level", "warning",
                "wsgi_app:app"])
    assert body.startswith("gunicorn pid=")
    # The answer came from a worker whose parent is the gunicorn master,
    # which prebind started: it did take the socket from LISTEN_FDS (with
    # no -b it would otherwise have bound 127.0.0.1:8000).
    master = int(body.split("ppid=")[1].split()[0])
    assert os.readlink(f"/proc/{master}/exe").startswith("/usr/bin/python3")
    assert p.stop() == 0
    assert wait_for(lambda: not pid_alive(master))


@pytest.mark.parametrize("fmt", ["url", "addr", "port"])
def test_curl_with_each_line_format(start, fmt):
    p = start([f"--print={fmt}", "--", PYTHON, server("stdlib_http.py")])
    line = p.readline()
    if fmt == "port":
        line = f"127.0.0.1:{int(line)}"
    assert curl(f"http://{line.split('://')[-1]}/x").startswith("stdlib pid=")

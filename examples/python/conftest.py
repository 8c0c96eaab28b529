"""pytest fixtures that start a server through prebind.

prebind binds and listens on 127.0.0.1, port 0 (the kernel picks a free
port), publishes the address, and only then runs the server with the socket
as fd 3. No port is ever released for another worker to grab, so this is
safe under `pytest -n auto`; and since the socket already listens, the test
may connect at once: no "wait until it answers" loop.

Two ways to read the address:

- prebind_port_fd(): from a pipe passed with --port-fd. prebind writes the
  address and closes its end, and the server never gets the pipe, so the
  reader gets EOF at once (or, if prebind failed, EOF with nothing). No
  files, and nothing of the server's output mixes in.
- prebind_print(): from prebind's stdout with --print. The first line is
  prebind's (written before the server runs); what follows is the
  server's own output on the same pipe, which must be drained or the server
  blocks once the pipe is full. A thread does that here.

prebind is $PREBIND, or `prebind` on PATH.
"""

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable  # Debian's /usr/bin/python3 owns python3-uvicorn, -gunicorn
TIMEOUT = 20  # seconds: the bound on every wait


def prebind_path():
    path = os.environ.get("PREBIND") or shutil.which("prebind")
    if not path:
        pytest.fail("prebind not found: set PREBIND or put prebind on PATH")
    return path


class Server:
    """A server running under prebind."""

    def __init__(self, proc, url, child_pid=None):
        self.proc = proc
        self.url = url                # http://127.0.0.1:41234
        self.child_pid = child_pid    # the server's pid (prebind's child)
        self.exit_status = None       # prebind's, set once stopped
        self._output = bytearray()    # with --print: the server's stdout
        self._drainer = None

    @property
    def port(self):
        return int(self.url.rsplit(":", 1)[1])

    def output(self):
        """What the server wrote to stdout so far (--print only)."""
        return bytes(self._output).decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=TIMEOUT):
        """Signal prebind (it forwards the signal to the server), wait, and
        return prebind's exit status: the server's own."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.exit_status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # prebind; --die-with-parent is not involved
            self.proc.wait(timeout=timeout)
            raise
        finally:
            if self._drainer:
                self._drainer.join(timeout)
            if self.proc.stdout:
                self.proc.stdout.close()
        return self.exit_status


def _read(fd, timeout, until_newline):
    """Read fd until EOF (or, if until_newline, the first newline), at most
    timeout seconds. Returns (data, EOF seen)."""
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not (until_newline and b"\n" in data):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"prebind published nothing within {timeout}s")
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return data, True
            data += chunk
    return data, False


def _prebind_failed(proc):
    try:
        status = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        return "prebind closed the pipe without publishing and did not exit"
    return f"prebind exited {status} without publishing (its stderr is above)"


@contextlib.contextmanager
def prebind_port_fd(command, *prebind_args, timeout=TIMEOUT):
    """Run COMMAND through prebind; the address comes from a --port-fd pipe,
    as json (url and the server's pid). Stops the server on exit."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [prebind_path(), f"--port-fd={w}", "--format=json",
             # If this pytest process dies, prebind stops the server.
             "--die-with-parent", *prebind_args, "--", *command],
            pass_fds=[w], stdin=subprocess.DEVNULL)
    finally:
        os.close(w)  # only prebind holds the write end now: EOF when it is done
    server = None
    try:
        with os.fdopen(r, "rb") as published:
            data, _ = _read(published.fileno(), timeout, until_newline=False)
        if not data:
            raise RuntimeError(_prebind_failed(proc))
        info = json.loads(data)
        server = Server(proc, info["sockets"][0]["url"], info["child_pid"])
        yield server
    finally:
        if server is None:
            proc.kill()
            proc.wait(timeout=timeout)
        elif server.exit_status is None:
            server.stop()


@contextlib.contextmanager
def prebind_print(command, *prebind_args, timeout=TIMEOUT):
    """Run COMMAND through prebind; the URL is the first line of prebind's
    stdout (--print=url). The rest of stdout is the server's: drained by a
    thread into server.output(). Stops the server on exit."""
    proc = subprocess.Popen(
        [prebind_path(), "--print=url", "--die-with-parent", *prebind_args, "--", *command],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    server = None
    try:
        fd = proc.stdout.fileno()
        data, eof = _read(fd, timeout, until_newline=True)
        if b"\n" not in data:
            raise RuntimeError(_prebind_failed(proc))
        line, rest = data.split(b"\n", 1)
        server = Server(proc, line.decode())
        server._output += rest

        def drain():
            while not eof:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                server._output += chunk

        server._drainer = threading.Thread(target=drain, daemon=True)
        server._drainer.start()
        yield server
    finally:
        if server is None:
            proc.kill()
            proc.wait(timeout=timeout)
            proc.stdout.close()
        elif server.exit_status is None:
            server.stop()


# The three servers, each as a fixture.

def stdlib_command():
    return [PYTHON, os.path.join(HERE, "stdlib_server.py")]


def uvicorn_command():
    return [PYTHON, "-m", "uvicorn", "--fd", "3", "--app-dir", HERE,
            "--log-level", "warning", "app_asgi:app"]


def gunicorn_command():
    # --graceful-timeout 5: a worker that gets the master's SIGTERM while
    # it still boots (before it has its own handlers) ignores it, and the
    # master waits its graceful timeout (30 s by default, more than
    # TIMEOUT) before it kills the worker; seen on a loaded machine.
    return [PYTHON, "-m", "gunicorn", "--chdir", HERE, "--workers", "2",
            "--graceful-timeout", "5", "--log-level", "warning", "app_wsgi:app"]


@pytest.fixture
def stdlib_server():
    """The stdlib server; address read from a --port-fd pipe."""
    with prebind_port_fd(stdlib_command()) as server:
        yield server


@pytest.fixture
def uvicorn_server():
    """uvicorn --fd 3; address read from a --port-fd pipe."""
    with prebind_port_fd(uvicorn_command()) as server:
        yield server


@pytest.fixture
def gunicorn_server():
    """gunicorn (reads LISTEN_FDS itself); address read from --print."""
    with prebind_print(gunicorn_command()) as server:
        yield server

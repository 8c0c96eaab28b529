"""Helpers for the plugin's own tests: real prebind, real servers, real
clients (http.client), every wait bounded, no fixed ports.

The plugin comes either from the installed package (its pytest11 entry
point) or, in the source tree, from `-p pytest_prebind.plugin` with
python/src on PYTHONPATH (python/meson.build does that)."""

import http.client
import json
import os
import socket
import sys

import pytest

pytest_plugins = ["pytester"]

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = os.path.join(HERE, "servers")
PYTHON = sys.executable  # Debian's /usr/bin/python3 (or a venv over it): owns uvicorn
TIMEOUT = 60  # seconds: the bound on every client wait (a loaded machine starts servers slowly)


def http_server(*args):
    """The command of tests/servers/http_server.py."""
    return [PYTHON, os.path.join(SERVERS, "http_server.py"), *args]


def uvicorn(app="token_app:app"):
    return [PYTHON, "-m", "uvicorn", "--fd", "3", "--app-dir", SERVERS,
            "--log-level", "warning", "--no-access-log", app]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        path = self.unix_path
        s.connect("\0" + path[1:] if path.startswith("@") else path)
        self.sock = s


def get(url, path="/", timeout=TIMEOUT):
    """GET url+path with http.client; url is http://host:port or unix:/path
    (unix:@name). Returns (status, body text)."""
    if url.startswith("unix:"):
        conn = UnixHTTPConnection(url[len("unix:"):], timeout=timeout)
    else:
        conn = http.client.HTTPConnection(url.split("://", 1)[1].rstrip("/"), timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def get_json(url, path="/", timeout=TIMEOUT):
    status, body = get(url, path, timeout)
    assert status == 200, body
    return json.loads(body)


def pid_alive(pid):
    """True if pid runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def plugin_args(pytestconfig):
    """What an inner pytest (pytester) needs to load the plugin the way
    this one did: nothing if the entry point did it, else -p."""
    if pytestconfig.pluginmanager.get_plugin("prebind") is not None:
        return []
    return ["-p", "no:prebind", "-p", "pytest_prebind.plugin"]

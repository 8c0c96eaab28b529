"""A server that must know its own port and URL, told by prebind's
templates: -E (environment) and --subst (arguments).

    PREBIND=/path/to/prebind python3 -m pytest test_config_template.py
"""

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable
RENDER = os.path.join(HERE, "render.py")
SERVER = os.path.join(HERE, "server.py")
TEMPLATE = os.path.join(HERE, "app.conf.in")
TIMEOUT = 20  # seconds: the bound on every wait


def prebind():
    path = os.environ.get("PREBIND") or shutil.which("prebind")
    if not path:
        pytest.fail("prebind not found: set PREBIND or put prebind on PATH")
    return path


@contextlib.contextmanager
def serve(*args):
    """prebind ARGS..., reading what it publishes (json) from a --port-fd
    pipe; yields (published, proc); SIGTERM at the end, status 0 expected."""
    r, w = os.pipe()
    proc = subprocess.Popen([prebind(), f"--port-fd={w}", "--format=json", *args],
                            pass_fds=[w], stdin=subprocess.DEVNULL)
    os.close(w)
    try:
        data, deadline = b"", time.monotonic() + TIMEOUT
        with selectors.DefaultSelector() as sel:
            sel.register(r, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(deadline - time.monotonic()):
                    chunk = os.read(r, 65536)
                    if not chunk:
                        break
                    data += chunk
            else:
                raise TimeoutError("prebind published nothing")
        assert data, f"prebind exited {proc.wait(TIMEOUT)} without publishing"
        yield json.loads(data), proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == 0
    finally:
        os.close(r)
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT)


def get(url):
    with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
        return resp.read().decode()


def settings(url):
    return dict(line.split("=", 1) for line in get(url).splitlines())


def test_config_from_environment(tmp_path):
    # -E: prebind expands {port} and {url} into the environment; render.py
    # fills ${PORT} and ${BASE_URL} in the template, then execs the server.
    conf = tmp_path / "app.conf"
    with serve("-E", "PORT={port}", "-E", "BASE_URL={url}", "--",
               PYTHON, RENDER, TEMPLATE, str(conf), "--", PYTHON, SERVER, "--config", str(conf)) as (pub, _):
        url, port = pub["sockets"][0]["url"], pub["sockets"][0]["port"]
        assert settings(url) == {"port": str(port), "public_url": url,
                                 "callback_url": f"{url}/oauth/callback"}
        assert f"port = {port}\n" in get(url + "/config")
        assert conf.read_text() == get(url + "/config")


def test_config_from_arguments(tmp_path):
    # --subst: the same templates in the command's arguments.
    conf = tmp_path / "app.conf"
    with serve("--subst", "--", PYTHON, RENDER, "--set", "PORT={port}", "--set", "BASE_URL={url}",
               TEMPLATE, str(conf), "--", PYTHON, SERVER, "--config", str(conf)) as (pub, _):
        url = pub["sockets"][0]["url"]
        assert settings(url)["public_url"] == url


def test_public_url_argument_of_a_named_socket():
    # No config file: the server is told its URL directly, by socket name.
    with serve("-l", "web=0", "--subst", "--", PYTHON, SERVER, "--public-url={web.url}") as (pub, _):
        url = pub["sockets"][0]["url"]
        assert settings(url) == {"port": str(pub["sockets"][0]["port"]), "public_url": url}


def test_literal_braces_and_no_subst():
    # {{ and }} are literal braces; without --subst, arguments are untouched.
    with serve("--subst", "--", PYTHON, SERVER, "--public-url={{url}}") as (pub, _):
        assert settings(pub["sockets"][0]["url"])["public_url"] == "{url}"
    with serve("--", PYTHON, SERVER, "--public-url={url}") as (pub, _):
        assert settings(pub["sockets"][0]["url"])["public_url"] == "{url}"


def test_a_config_with_the_wrong_port_is_refused(tmp_path):
    conf = tmp_path / "app.conf"
    out = subprocess.run([prebind(), "-q", "-E", "PORT=1", "-E", "BASE_URL={url}", "--",
                          PYTHON, RENDER, TEMPLATE, str(conf), "--", PYTHON, SERVER, "--config", str(conf)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 2
    assert "says port 1" in out.stderr


def test_an_unknown_template_is_an_error_before_the_server_runs():
    out = subprocess.run([prebind(), "-E", "PORT={nosuch.port}", "--", PYTHON, SERVER, "--public-url=x"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and "nosuch" in out.stderr

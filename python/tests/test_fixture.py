"""The prebind fixture: several servers per test, named sockets, teardown,
and what a failing test shows (run in an inner pytest through pytester)."""

import os
import textwrap
import uuid

import pytest

from conftest import SERVERS, TIMEOUT, get, get_json, http_server, pid_alive, uvicorn


def test_fixture(prebind):
    token = uuid.uuid4().hex
    srv = prebind(http_server(), setenv={"TOKEN": token})
    answer = get_json(srv.url)
    assert answer["token"] == token and answer["pid"] == srv.pid
    assert srv.port > 0 and srv.host == "127.0.0.1"


def test_several_servers_in_one_test(prebind):
    tokens = [uuid.uuid4().hex for _ in range(4)]
    servers = [prebind(http_server(), setenv={"TOKEN": t}) for t in tokens]
    assert len({s.port for s in servers}) == 4
    for srv, token in zip(servers, tokens):
        assert get_json(srv.url)["token"] == token


def test_named_sockets(prebind, tmp_path):
    srv = prebind(http_server(), listen={"web": "0", "admin": str(tmp_path / "admin.sock")})
    assert get_json(srv["web"].url)["name"] == "web"
    assert get_json(srv["admin"].url)["name"] == "admin"
    assert srv["admin"].url == f"unix:{tmp_path}/admin.sock"


def test_uvicorn(prebind):
    token = uuid.uuid4().hex
    srv = prebind(uvicorn(), setenv={"TOKEN": token})
    status, body = get(srv.url)
    assert status == 200 and body.split() == [token, str(srv.pid)]


INNER = f"""
import os, sys, pytest
from pytest_prebind import StartError
SERVER = [sys.executable, {os.path.join(SERVERS, "http_server.py")!r}]

def get(url, path="/"):
    import urllib.request
    return urllib.request.urlopen(url + path, timeout={TIMEOUT}).read()

def test_passes(prebind):
    srv = prebind(SERVER)
    get(srv.url)

def test_bad_usage(prebind):
    prebind(SERVER, options=["--no-such-option"])

def test_not_found(prebind):
    prebind(["no-such-command-for-prebind"], ready=True)

def test_exits_before_ready(prebind):
    prebind([sys.executable, "-c", "print('early-exit-marker'); raise SystemExit(3)"], ready=True)

def test_exits_during_the_test(prebind):
    srv = prebind(SERVER)
    get(srv.url, "/exit/9")
    srv.wait(timeout={TIMEOUT})

def test_failure_shows_the_output(prebind):
    srv = prebind(SERVER + ["--say=output-section-marker"])
    get(srv.url)
    assert False, "the test itself fails"

def test_ignores_sigterm(prebind, tmp_path_factory):
    srv = prebind(SERVER + ["--ignore-term"], stop_timeout=1)
    get(srv.url)
    with open(os.environ["PID_FILE"], "w") as f:
        f.write(str(srv.pid))

def test_start_error_can_be_caught(prebind):
    with pytest.raises(StartError) as e:
        prebind(SERVER, listen="not-an-address")
    assert e.value.status == 125
"""


def test_what_failing_tests_show(pytester, plugin_args, tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess(*plugin_args, "-p", "no:cacheprovider", timeout=4 * TIMEOUT)
    out = result.stdout.str()
    result.assert_outcomes(passed=4, failed=4, errors=1)
    result.stdout.fnmatch_lines([
        "*_ test_bad_usage _*",
        "E  *prebind exited without publishing*",
        "E  *exit status 125: prebind itself failed*",
        "E  *prebind: unknown option '--no-such-option' (see --help)",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_not_found _*",
        "E  *exit status 127: the command was not found",
        "E  *prebind: cannot run 'no-such-command-for-prebind': No such file or directory",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_exits_before_ready _*",
        "E  *exit status 3: the server exited with status 3",
        "E  *| early-exit-marker",
    ])
    result.stdout.fnmatch_lines([
        "*_ ERROR at teardown of test_exits_during_the_test _*",
        "the server exited before the test ended",
        "  exit status 9: the server exited with status 9",
        "*| http_server: exiting with 9 as asked",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_failure_shows_the_output _*",
        "*the test itself fails*",
        "*- prebind server 0: *http_server.py --say=output-section-marker -*",
        "running; http://127.0.0.1:*",
        "output-section-marker",
    ])
    # Only failed tests get the section; the plugin's own frames are hidden.
    assert out.count("- prebind server 0:") == 1
    assert "_server.py:" not in out and "plugin.py:" not in out
    # The server that ignored SIGTERM was killed at teardown.
    pid = int(pid_file.read_text())
    assert not pid_alive(pid)


def test_binary_from_ini_and_command_line(pytester, plugin_args, monkeypatch):
    from pytest_prebind import find_prebind

    binary = find_prebind()
    monkeypatch.delenv("PREBIND", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    pytester.makeini(f"[pytest]\nprebind_binary = {binary}\n")
    pytester.makepyfile(test_inner=f"""
        import sys
        def test_it(prebind):
            srv = prebind([sys.executable, {os.path.join(SERVERS, "http_server.py")!r}])
            assert srv.port > 0
    """)
    result = pytester.runpytest_subprocess(*plugin_args, "-p", "no:cacheprovider", timeout=2 * TIMEOUT)
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*plugin_args, "-p", "no:cacheprovider",
                                           "--prebind-binary=/nonexistent/prebind", timeout=2 * TIMEOUT)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PrebindNotFound: prebind binary '/nonexistent/prebind' does not exist*"])

"""pytest_prebind.Server: the command line it builds, what it reads back,
how it fails and how it stops, against the real prebind and real servers."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import pytest_prebind
from pytest_prebind import PrebindNotFound, Server, ServerExited, StartError

from conftest import PYTHON, TIMEOUT, get_json, http_server, pid_alive

PREBIND = pytest_prebind.find_prebind()


# ---- the command line --------------------------------------------------------

def test_keyword_arguments_become_options():
    srv = Server(["server", "--port={port}"],
                 listen={"web": "0", "admin": "@adm"}, setenv={"A": "{url}", "HOME": None},
                 subst=True, ready=2.5, ready_timeout="3s", ready_log="Ready to accept",
                 ready_http="/health", ready_exec="curl -f {url}", intercept={"web": 8080},
                 intercept_via="forward",
                 restart="on-failure", group=True,
                 options=["--netns", "--ready-interval=50ms"], stop_timeout=2)
    assert srv.argv == [
        PREBIND, "--port-fd=N", "--format=json", "--die-with-parent", "--kill-after=2s",
        "--listen=web=0", "--listen=admin=@adm", "--setenv=A={url}", "--setenv=HOME",
        "--subst", "--ready=2500ms", "--ready-timeout=3s", "--ready-log=Ready to accept",
        "--ready-http=/health", "--ready-exec=curl -f {url}", "--intercept=web=8080",
        "--intercept-via=forward",
        "--restart=on-failure", "--group",
        "--netns", "--ready-interval=50ms", "--", "server", "--port={port}"]


@pytest.mark.parametrize("intercept, expected", [
    (8080, ["--intercept=8080"]), ("web=8080", ["--intercept=web=8080"]),
    ([8080, "admin=9090"], ["--intercept=8080", "--intercept=admin=9090"]),
])
def test_intercept_forms(intercept, expected):
    assert Server(["x"], intercept=intercept).options == expected
    assert Server(["x"], ready_http=True).options == ["--ready-http"]


@pytest.mark.parametrize("kwargs, timeout", [
    ({}, 60), ({"timeout": 5}, 5), ({"timeout": None}, None),
    ({"ready": True}, 95), ({"ready": 10}, 60), ({"ready": "2m"}, 125), ({"ready": "infinity"}, None),
    ({"ready": True, "ready_timeout": "100s"}, 105), ({"ready_log": "up"}, 95),
    ({"ready_http": True, "ready_timeout": "500ms"}, 60),
])
def test_start_timeout_follows_readiness(kwargs, timeout):
    assert Server(["x"], **kwargs).timeout == timeout


@pytest.mark.parametrize("listen, expected", [
    ("0", ["--listen=0"]),
    (["web=0", "udp:0"], ["--listen=web=0", "--listen=udp:0"]),
    ({"a": "[::1]:0"}, ["--listen=a=[::1]:0"]),
    (None, []),
])
def test_listen_forms(listen, expected):
    assert Server(["x"], listen=listen).options == expected


@pytest.mark.parametrize("ready, expected", [
    (True, ["--ready"]), (False, []), (None, []), (30, ["--ready=30s"]), (0.25, ["--ready=250ms"]),
    ("infinity", ["--ready=infinity"]),
])
def test_ready_forms(ready, expected):
    assert Server(["x"], ready=ready).options == expected


def test_exec_drops_the_supervisor_options():
    argv = Server(["x"], options=["--exec"]).argv
    assert "--die-with-parent" not in argv and not any(a.startswith("--kill-after") for a in argv)
    argv = Server(["x"], die_with_parent=False).argv
    assert "--die-with-parent" not in argv


@pytest.mark.parametrize("kwargs, error", [
    ({"options": ["--format=url"]}, ValueError),
    ({"options": ["--port-fd=7"]}, ValueError),
    ({"options": "--exec"}, TypeError),
    ({"stop_timeout": 0}, ValueError),
    ({"ready": "soon"}, ValueError),
    ({"ready": 1, "ready_timeout": True}, TypeError),
])
def test_bad_arguments_are_refused_before_anything_runs(kwargs, error):
    with pytest.raises(error):
        Server(["x"], **kwargs)


def test_command_must_be_a_list():
    with pytest.raises(TypeError, match="list of arguments"):
        Server("python3 -m app")
    with pytest.raises(ValueError):
        Server([])


def test_binary_not_found(tmp_path):
    with pytest.raises(PrebindNotFound, match="does not exist"):
        Server(["x"], binary=str(tmp_path / "prebind")).start()
    env = dict(os.environ, PATH=str(tmp_path))
    env.pop("PREBIND", None)
    out = subprocess.run([PYTHON, "-c", "import pytest_prebind; pytest_prebind.find_prebind()"],
                         env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode != 0 and "not found on PATH" in out.stderr


# ---- what it reads back ------------------------------------------------------

def test_one_server(tmp_path):
    token = uuid.uuid4().hex
    with Server(http_server(), setenv={"TOKEN": token}) as srv:
        assert srv.url == f"http://127.0.0.1:{srv.port}" and srv.host == "127.0.0.1"
        assert srv.addr == f"127.0.0.1:{srv.port}"
        answer = get_json(srv.url)
        assert answer["token"] == token and answer["pid"] == srv.pid
        assert srv.prebind_pid != srv.pid and pid_alive(srv.prebind_pid)
        assert srv.published["pid"] == srv.prebind_pid
        assert srv[0] is srv.sockets[0] and srv[0].fd == 3 and srv[0].name == "unknown"
        assert srv.running and srv.returncode is None
    assert not pid_alive(srv.pid)
    assert srv.returncode == 128 + signal.SIGTERM
    assert "serving 1 sockets" in srv.output()


def test_named_sockets(tmp_path):
    abstract = f"@prebind-plugin-{uuid.uuid4().hex}"
    path = str(tmp_path / "admin.sock")
    with Server(http_server(), listen={"web": "0", "admin": path, "ctl": abstract}) as srv:
        assert [s.name for s in srv.sockets] == ["web", "admin", "ctl"]
        assert [s.fd for s in srv.sockets] == [3, 4, 5]
        web, admin, ctl = srv["web"], srv["admin"], srv["ctl"]
        assert web.family == "ipv4" and web.type == "stream" and web.port == srv.port
        assert admin.url == f"unix:{path}" and admin.port is None and admin.host == path
        assert ctl.address == abstract and ctl.url == f"unix:{abstract}"
        for s in srv.sockets:
            assert get_json(s.url)["name"] == s.name
        with pytest.raises(KeyError, match="'web', 'admin', 'ctl'"):
            srv["nope"]
    assert not os.path.exists(path)


def test_ipv6():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with Server(http_server(), listen="[::1]:0") as srv:
        assert srv.host == "::1" and srv.url == f"http://[::1]:{srv.port}"
        assert srv.addr == f"[::1]:{srv.port}" and srv[0].family == "ipv6"
        assert get_json(srv.url)["pid"] == srv.pid


def test_setenv_and_subst():
    with Server(http_server("--say=at {url}"), setenv={"TOKEN": "port={web.port}"}, subst=True,
                listen="web=0") as srv:
        answer = get_json(srv.url)
        assert answer["token"] == f"port={srv.port}"
        assert answer["argv"] == [f"--say=at {srv.url}"]
    assert f"at {srv.url}" in srv.output()


def test_raw_options_reach_prebind():
    srv = Server(http_server(), options=["--success-status=143", "--backlog=8"]).start()
    assert get_json(srv.url)["pid"] == srv.pid
    assert srv.stop() == 0  # SIGTERM's 143, reported as success


def test_ready():
    with Server(http_server("--ready-after=0.3"), ready=TIMEOUT) as srv:
        assert get_json(srv.url)["pid"] == srv.pid


def test_restart_keeps_the_address():
    with Server(http_server(), restart="on-failure") as srv:
        first = get_json(srv.url, "/exit/1")["pid"]
        assert first == srv.pid
        second = get_json(srv.url)["pid"]  # queued in the backlog until the new server accepts
        assert second != first and srv.running


def test_output_can_be_left_alone():
    with Server(http_server("--say=uncaptured-marker"), capture_output=False) as srv:
        assert get_json(srv.url)["pid"] == srv.pid
        assert srv.output() == ""


def test_outside_pytest():
    """The context manager in a plain program: pytest is never imported."""
    script = textwrap.dedent(f"""
        import json, sys, urllib.request
        import pytest_prebind
        with pytest_prebind.Server({http_server()!r}, setenv={{"TOKEN": "plain"}}) as srv:
            answer = json.load(urllib.request.urlopen(srv.url, timeout={TIMEOUT}))
        print(answer["token"], answer["pid"] == srv.pid, srv.returncode, "pytest" in sys.modules)
    """)
    out = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=2 * TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["plain", "True", "143", "False"]


# ---- how it fails --------------------------------------------------------------

def test_bad_usage():
    with pytest.raises(StartError) as e:
        Server(http_server(), options=["--no-such-option"]).start()
    assert e.value.status == 125
    assert e.value.error_lines == ["prebind: unknown option '--no-such-option' (see --help)"]
    assert "exit status 125: prebind itself failed" in str(e.value)
    assert "prebind: unknown option '--no-such-option'" in str(e.value)


def test_bind_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartError) as e:
            Server(http_server(), listen=str(port)).start()
    assert e.value.status == 125
    assert e.value.error_lines == [f"prebind: cannot listen on '{port}': Address already in use"]


def test_not_executable(tmp_path):
    script = tmp_path / "server"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    status, error = _start_and_fail([str(script)])
    assert status == 126
    assert f"prebind: cannot run '{script}'" in str(error)


def _start_and_fail(command, **kwargs):
    """Start a server that exits at once: either start() sees prebind exit
    first (StartError), or it exits just after publishing (ServerExited
    from check()). Returns (status, error)."""
    srv = Server(command, **kwargs)
    try:
        srv.start()
    except StartError as e:
        return e.status, e
    srv.wait(timeout=TIMEOUT)
    assert srv.exited_on_its_own
    with pytest.raises(ServerExited) as e:
        srv.check()
    srv.stop()
    return e.value.status, e.value


def test_command_not_found():
    status, error = _start_and_fail(["no-such-command-for-prebind"])
    assert status == 127
    assert "the command was not found" in str(error)
    assert "prebind: cannot run 'no-such-command-for-prebind'" in str(error)


def test_command_not_found_with_ready():
    """With ready= nothing is published before READY=1: the failure is
    always StartError, at start."""
    with pytest.raises(StartError) as e:
        Server(["no-such-command-for-prebind"], ready=TIMEOUT).start()
    assert e.value.status == 127


def test_server_exits_early():
    command = [PYTHON, "-c", "import sys; print('server: config file missing', file=sys.stderr); sys.exit(3)"]
    status, error = _start_and_fail(command)
    assert status == 3
    assert "the server exited with status 3" in str(error)
    assert "| server: config file missing" in str(error)
    with pytest.raises(StartError) as e:
        Server(command, ready=TIMEOUT).start()
    assert e.value.status == 3 and "server: config file missing" in e.value.output
    assert any("exited before it was ready" in line for line in e.value.error_lines)


def test_error_shows_the_end_of_a_long_output():
    command = [PYTHON, "-c", "print('x' * 200000); print('the last line'); raise SystemExit(4)"]
    with pytest.raises(StartError) as e:
        Server(command, ready=TIMEOUT).start()
    assert e.value.status == 4
    assert e.value.output.splitlines()[-2:] == [
        "the last line", "prebind: '%s' exited before it was ready, with status 4: did not send READY=1" % PYTHON]
    assert len(e.value.output) <= 64 * 1024
    assert " more characters)\n    | the last line" in str(e.value)  # long lines shortened


def test_not_ready_in_time():
    with pytest.raises(StartError) as e:
        Server(http_server(), ready=0.3).start()
    assert e.value.status == 124 and "not ready in time" in str(e.value)
    assert e.value.error_lines, str(e.value)


def test_start_timeout_stops_the_server():
    srv = Server(http_server(), ready=TIMEOUT, timeout=0.5, stop_timeout=1)
    with pytest.raises(StartError, match="published nothing within 0.5s") as e:
        srv.start()
    assert e.value.status is None
    assert not pid_alive(srv.prebind_pid)


def test_server_exits_during_use():
    srv = Server(http_server()).start()
    get_json(srv.url, "/exit/7")
    assert srv.wait(timeout=TIMEOUT) == 7
    with pytest.raises(ServerExited, match="the server exited with status 7"):
        srv.check()
    assert srv.stop() == 7


# ---- how it stops -------------------------------------------------------------

def test_stop_kills_a_server_that_ignores_sigterm():
    srv = Server(http_server("--ignore-term"), stop_timeout=1).start()
    assert get_json(srv.url)["pid"] == srv.pid
    # prebind's --kill-after=1s did it (a SIGKILL from the plugin, after
    # 5 more seconds, would leave prebind's status -9).
    assert srv.stop() == 128 + signal.SIGKILL
    assert not pid_alive(srv.pid)
    assert "sending SIGKILL" in srv.output()


def test_stop_kills_an_exec_server_that_ignores_sigterm():
    """With --exec prebind is the server: the plugin escalates itself."""
    srv = Server(http_server("--ignore-term"), options=["--exec"], stop_timeout=0.5).start()
    assert srv.pid == srv.prebind_pid
    assert get_json(srv.url)["pid"] == srv.pid
    assert srv.stop() == -signal.SIGKILL
    assert not pid_alive(srv.pid)


def test_the_server_dies_with_a_killed_prebind():
    """prebind(1), WHEN PREBIND DIES: COMMAND does not outlive a prebind
    killed with SIGKILL (its parent-death signal, and the guard), without
    the plugin's help; stop() afterwards is harmless."""
    srv = Server(http_server()).start()
    assert get_json(srv.url)["pid"] == srv.pid  # COMMAND runs: exec'd, watched
    os.kill(srv.prebind_pid, signal.SIGKILL)
    assert srv.wait(timeout=TIMEOUT) == -signal.SIGKILL
    assert wait_until_gone(srv.pid)
    assert srv.stop() == srv.stop() == -signal.SIGKILL
    assert not srv.running


def test_stop_kills_the_server_prebind_left_behind():
    """With --no-die-with-supervisor the server outlives a killed prebind:
    stop() kills it, through the pidfd it took at start."""
    srv = Server(http_server(), options=["--no-die-with-supervisor"]).start()
    assert get_json(srv.url)["pid"] == srv.pid
    os.kill(srv.prebind_pid, signal.SIGKILL)
    assert srv.wait(timeout=TIMEOUT) == -signal.SIGKILL
    time.sleep(0.2)  # time for a death signal or a guard to act, were there one
    assert pid_alive(srv.pid)  # an orphan now, still serving
    assert get_json(srv.url)["pid"] == srv.pid
    assert srv.stop() == -signal.SIGKILL
    assert wait_until_gone(srv.pid)


def wait_until_gone(pid):
    """True once pid is gone (or a zombie), within TIMEOUT seconds."""
    deadline = time.monotonic() + TIMEOUT
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not pid_alive(pid)


def test_group_stops_the_whole_tree():
    srv = Server(http_server("--spawn-child"), group=True, stop_timeout=1).start()
    child = get_json(srv.url)["children"][0]
    assert pid_alive(child)
    srv.stop()
    assert wait_until_gone(child)


def test_stop_twice():
    srv = Server(http_server()).start()
    assert srv.stop() == srv.stop() == 128 + signal.SIGTERM


def test_servers_die_with_their_parent():
    script = textwrap.dedent(f"""
        import sys, time
        import pytest_prebind
        srv = pytest_prebind.Server({http_server()!r}).start()
        print(srv.pid, flush=True)
        time.sleep({TIMEOUT})
    """)
    proc = subprocess.Popen([PYTHON, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        assert pid_alive(pid)
    finally:
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
    assert wait_until_gone(pid)

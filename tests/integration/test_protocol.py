"""The LISTEN_FDS protocol as COMMAND sees it, read by the probe helper:
fds, environment, signal state, pid."""

import json
import os
import signal
import subprocess

from conftest import PREBIND, PROBE, TIMEOUT, run


def probe_report(args, env=None, pass_fds=(), preexec_fn=None):
    out = subprocess.run([PREBIND, "-q", *args, "--", PROBE], capture_output=True, text=True,
                         timeout=TIMEOUT, env=env, pass_fds=pass_fds, preexec_fn=preexec_fn)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1]), out


def test_fds_are_exactly_stdio_and_the_sockets_even_with_inherited_extras(tmp_path):
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.set_inheritable(w, True)
    extra = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)  # not O_CLOEXEC
    os.set_inheritable(extra, True)
    try:
        report, _ = probe_report(["-l", "a=0", "-l", "b=udp:127.0.0.1:0", "-l", f"c={tmp_path}/s"],
                                 pass_fds=(r, w, extra))
    finally:
        for fd in (r, w, extra):
            os.close(fd)
    fds = {f["fd"]: f for f in report["fds"]}
    assert sorted(fds) == [0, 1, 2, 3, 4, 5]
    assert (fds[3]["type"], fds[4]["type"], fds[5]["type"]) == ("sock-stream", "sock-dgram", "sock-stream")
    assert fds[3]["listening"] and fds[5]["listening"]
    assert fds[5]["family"] == "unix" and fds[5]["address"] == f"{tmp_path}/s"
    assert not any(f["cloexec"] for f in fds.values())


def test_sockets_fill_3_onwards_when_prebind_inherited_fds_in_that_range():
    # Inherited fds sit at 3, 4, 5..., where prebind's own sockets must
    # land in COMMAND: the layout has to move them out of the way.
    keep = [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
    for fd in keep:
        os.set_inheritable(fd, True)
    try:
        report, _ = probe_report(["-l", "0", "-l", "0", "-l", "0"], pass_fds=keep)
    finally:
        for fd in keep:
            os.close(fd)
    fds = {f["fd"]: f for f in report["fds"]}
    assert sorted(fds) == [0, 1, 2, 3, 4, 5]
    assert all(fds[i]["type"] == "sock-stream" and fds[i]["listening"] for i in (3, 4, 5))
    assert len({fds[i]["port"] for i in (3, 4, 5)}) == 3


def test_port_fd_is_not_seen_by_command():
    r, w = os.pipe()
    os.set_inheritable(w, True)
    try:
        report, _ = probe_report([f"--port-fd={w}"], pass_fds=(w,))
        os.close(w)
        published = os.read(r, 4096).decode()
    finally:
        os.close(r)
    fds = [f["fd"] for f in report["fds"]]
    assert fds == [0, 1, 2, 3]
    assert published == f"{[f for f in report['fds'] if f['fd'] == 3][0]['port']}\n"


def test_environment_drops_inherited_activation_variables():
    env = dict(os.environ, LISTEN_FDS="7", LISTEN_PID="1", LISTEN_FDNAMES="a:b:c:d:e:f:g",
               LISTEN_PIDFDID="12345", NOTIFY_SOCKET="/run/nowhere", KEEP_ME="yes")
    report, _ = probe_report(["-l", "web=0", "-l", "0"], env=env)
    e = report["env"]
    assert e["LISTEN_FDS"] == "2"
    assert e["LISTEN_PID"] == str(report["pid"])
    assert e["LISTEN_FDNAMES"] == "web:unknown"
    assert e["LISTEN_PIDFDID"] is None
    assert e["NOTIFY_SOCKET"] is None


def test_setenv_name_alone_passes_a_variable_on_deliberately():
    env = dict(os.environ, NOTIFY_SOCKET="@outer")
    out = subprocess.run([PREBIND, "-q", "-E", "NOTIFY_SOCKET", "-E", "FOO=bar", "--", PROBE, "--env", "FOO"],
                         capture_output=True, text=True, timeout=TIMEOUT, env=env)
    report = json.loads(out.stdout)
    assert report["env"]["NOTIFY_SOCKET"] == "@outer"
    assert report["env"]["FOO"] == "bar"


def test_listen_pid_is_commands_pid_not_prebinds():
    p = subprocess.Popen([PREBIND, "-q", "--print=json", "--", PROBE], stdout=subprocess.PIPE, text=True)
    published, probe_line = p.communicate(timeout=TIMEOUT)[0].splitlines()
    published, report = json.loads(published), json.loads(probe_line)
    assert p.returncode == 0
    assert published["pid"] == p.pid
    assert published["child_pid"] == report["pid"] != p.pid
    assert report["env"]["LISTEN_PID"] == str(report["pid"])
    assert report["ppid"] == p.pid


def test_exec_mode_keeps_the_pid():
    p = subprocess.Popen([PREBIND, "-q", "--exec", "--print=json", "--", PROBE], stdout=subprocess.PIPE,
                         text=True)
    published, probe_line = p.communicate(timeout=TIMEOUT)[0].splitlines()
    published, report = json.loads(published), json.loads(probe_line)
    assert report["pid"] == p.pid == published["pid"] == published["child_pid"]
    assert report["env"]["LISTEN_PID"] == str(p.pid)
    assert [f["fd"] for f in report["fds"]] == [0, 1, 2, 3]


def _hostile_signal_state():
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGPIPE,
                signal.SIGCHLD):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGHUP, signal.SIGALRM})


def test_signal_mask_and_ignored_signals_are_reset_for_command():
    for mode in ([], ["--exec"]):
        report, _ = probe_report(mode, preexec_fn=_hostile_signal_state)
        assert int(report["sigblk"], 16) == 0, mode
        assert int(report["sigign"], 16) == 0, mode


def test_inherited_ignored_sigchld_does_not_lose_the_exit_status():
    out = subprocess.run([PREBIND, "-q", "--", PROBE, "--exit", "7"], capture_output=True,
                         timeout=TIMEOUT, preexec_fn=_hostile_signal_state)
    assert out.returncode == 7


def test_stdio_closed_is_not_reused_for_a_socket(tmp_path):
    # With fd 1 closed, a naive socket() would land on 1 and COMMAND would
    # find the listening socket as its stdout.
    report = tmp_path / "report"
    out = subprocess.run(f"exec {PREBIND} -q -- {PROBE} >&-", shell=True, capture_output=True, timeout=TIMEOUT,
                         env=dict(os.environ, PROBE_OUT=str(report)))
    assert out.returncode == 0, out.stderr
    fds = {f["fd"]: f for f in json.loads(report.read_text())["fds"]}
    assert fds[1]["target"] == "/dev/null" and fds[3]["type"] == "sock-stream"

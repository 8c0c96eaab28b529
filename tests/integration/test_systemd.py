"""systemd integration: --ready with real notifiers, prebind's own
manager (nested prebind), pass-through from a real activator."""

import json
import os
import signal
import socket
import subprocess
import time

from conftest import (EXAMPLE_C_SERVER, PREBIND, PYTHON, SERVERS, TIMEOUT, command_child, http_get, pid_alive, run,
                      server, wait_for)


def child_of(pid):
    return int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])


def notify_server(*steps):
    return [PYTHON, server("notify_server.py"), *steps]


def test_c_server_ready_after_a_delay_port_file_appears_only_then(start, tmp_path):
    pf = tmp_path / "port"
    started = time.time()
    p = start(["--ready=20s", f"--port-file={pf}", "--format=url", "--", EXAMPLE_C_SERVER, "--notify-after=1"])
    assert wait_for(pf.exists)
    # Written once READY=1 came, a second after the server started, and
    # never before: running and listening is not ready.
    assert pf.stat().st_mtime - started >= 0.9
    assert http_get(pf.read_text().strip())[0] == 200
    assert p.stop() == 0
    assert not pf.exists()


def test_gunicorn_sends_ready_itself(start, tmp_path):
    pf = tmp_path / "port"
    p = start(["-v", "--ready=20s", f"--port-file={pf}", "--format=url", "--", PYTHON, "-m", "gunicorn",
               "--chdir", SERVERS, "--workers", "1", "wsgi_app:app"])
    assert wait_for(pf.exists)
    master = child_of(p.pid)
    status, body = http_get(pf.read_text().strip())
    assert status == 200 and f"ppid={master}" in body
    assert p.stop() == 0
    err = p.err
    # The READY=1 that made prebind publish came from the gunicorn master.
    assert f"READY=1 from pid {master}" in err, err
    assert "Gunicorn arbiter booted" in err


def test_never_ready_times_out_with_124_and_leaves_nothing(tmp_path):
    pf = tmp_path / "port"
    t0 = time.monotonic()
    out = run(["--ready=1s", f"--port-file={pf}", "--print", "--", PYTHON, server("stdlib_http.py")])
    assert out.returncode == 124
    assert 0.9 < time.monotonic() - t0 < TIMEOUT
    assert out.stdout == ""
    assert "did not send READY=1 within 1.0s" in out.stderr
    assert os.listdir(tmp_path) == []


def test_never_ready_and_ignoring_sigterm_is_killed(tmp_path):
    out = run(["-q", "--ready=0.5s", "--kill-after=0.5s", "--group", "--", "sh", "-c",
               "trap '' TERM; sleep 30 & wait"])
    assert out.returncode == 124


def test_exit_before_ready_passes_the_status_and_publishes_nothing(tmp_path):
    pf = tmp_path / "port"
    out = run(["--ready", f"--port-file={pf}", "--print", "--", "sh", "-c", "exit 3"])
    assert out.returncode == 3
    assert out.stdout == "" and "exited before it was ready" in out.stderr
    assert os.listdir(tmp_path) == []


def test_forged_ready_from_another_process_is_ignored(start, tmp_path):
    pf = tmp_path / "port"
    trigger = tmp_path / "send-ready"
    p = start(["--ready=20s", f"--port-file={pf}", "--", *notify_server(f"wait:{trigger}", "send:READY=1")])
    child = command_child(p.pid, "NOTIFY_SOCKET")  # COMMAND has been exec'd
    assert child
    env = dict(e.split("=", 1) for e in open(f"/proc/{child}/environ").read().split("\0") if "=" in e)
    address = env["NOTIFY_SOCKET"]
    assert address.startswith("@")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:  # this test is not COMMAND
        s.sendto(b"READY=1", "\0" + address[1:])
    p.wait_stderr("ignoring a notification from pid")
    assert not pf.exists()
    trigger.touch()
    assert wait_for(pf.exists)  # the real READY=1, later
    p.stop()


def test_extend_timeout_and_errno_and_status_are_honoured(start, tmp_path):
    pf = tmp_path / "port"
    p = start(["--ready=1s", f"--port-file={pf}", "--", *notify_server(
        r"send:EXTEND_TIMEOUT_USEC=3000000\nSTATUS=warming up", "sleep:1.5", "send:ERRNO=2", "send:READY=1")])
    assert wait_for(pf.exists)
    assert p.stop() == 128 + signal.SIGTERM
    err = p.err
    assert "warming up" in err
    assert "reports error 2 (No such file or directory)" in err


def test_ready_from_a_descendant_counts(start, tmp_path):
    pf = tmp_path / "port"
    # COMMAND is a shell; the server that notifies is its child.
    p = start(["--ready=20s", "--group", f"--port-file={pf}", "--", "sh", "-c",
               f"{PYTHON} {server('notify_server.py')} send:READY=1; exit 0"])
    assert wait_for(pf.exists)
    p.stop()


def test_nested_outer_prebind_sees_inner_ready_and_status(start, tmp_path):
    outer_pf, inner_pf = tmp_path / "outer", tmp_path / "inner"
    p = start(["-v", "--ready=20s", f"--port-file={outer_pf}", "--",
               PREBIND, f"--port-file={inner_pf}", "-l", "web=0", "--", PYTHON, server("stdlib_http.py")])
    assert wait_for(outer_pf.exists)
    assert inner_pf.exists()  # the inner published before it said READY=1
    outer_port = outer_pf.read_text().split()
    inner_ports = inner_pf.read_text().split()
    # The outer socket was passed through the inner prebind, first.
    assert inner_ports[0] == outer_port[0] and len(inner_ports) == 2
    assert http_get(f"http://127.0.0.1:{outer_port[0]}")[0] == 200
    assert p.stop() == 128 + signal.SIGTERM
    err = p.err
    assert f"listening on http://127.0.0.1:{inner_ports[0]}, http://127.0.0.1:{inner_ports[1]}" in err, err
    assert "is stopping" in err  # the inner's STOPPING=1


def test_pass_through_from_systemd_socket_activate(tmp_path):
    outer = tmp_path / "outer.sock"
    act = subprocess.Popen(["systemd-socket-activate", "-l", str(outer), "--fdname=outer", "--",
                            PREBIND, "-q", "--print=json", "-l", "inner=0", "--", EXAMPLE_C_SERVER,
                            "--expect", "outer:stream:unix", "--expect", "inner:stream:ipv4"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(outer.exists)
        # systemd-socket-activate starts its command on the first connection.
        status, body = http_get(f"unix:{outer}")
        assert status == 200 and "fd=3 name=outer" in body
        doc = json.loads(act.stdout.readline())
        assert [(s["name"], s["fd"], s["family"]) for s in doc["sockets"]] == [
            ("outer", 3, "unix"), ("inner", 4, "ipv4")]
        assert doc["sockets"][0]["address"] == str(outer)
        status, body = http_get(doc["sockets"][1]["url"])
        assert status == 200 and "fd=4 name=inner" in body
        act.send_signal(signal.SIGTERM)
        assert act.wait(timeout=TIMEOUT) == 0
    finally:
        if act.poll() is None:
            act.kill()
            act.wait()
        act.stdout.close()
        act.stderr.close()

"""The supervisor: every signal forwarded once (to the group with
--group), PID 1 reaping, terminal signals, shutdown escalation, parent
death, exit status mapping."""

import json
import os
import pty
import signal
import subprocess
import sys
import time

import pytest

from conftest import PREBIND, PROBE, TIMEOUT, assert_nothing_within, need_unshare, pid_alive, run, wait_for

CATCHABLE = [s for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD)]
REALTIME = [signal.SIGRTMIN, signal.SIGRTMIN + 1]


def read_log(path):
    return [int(s) for s in path.read_text().split()] if path.exists() else []


def wait_log(path, expected_len):
    return wait_for(lambda: len(read_log(path)) >= expected_len)


def test_every_catchable_and_realtime_signal_is_forwarded_exactly_once(start, tmp_path):
    log = tmp_path / "signals"
    p = start(["-q", "--", PROBE, "--signal-log", str(log), "--sleep", str(TIMEOUT)])
    p.readline()  # the probe's report: its handlers are installed
    sent = [s for s in CATCHABLE if s != signal.SIGTERM] + REALTIME
    for i, sig in enumerate(sent):
        p.send(sig)
        assert wait_log(log, i + 1), (sig, read_log(log))
    # SIGCHLD is prebind's own business: never forwarded.
    p.send(signal.SIGCHLD)
    p.send(signal.SIGTERM)
    assert p.wait() == 0
    assert read_log(log) == [int(s) for s in sent] + [signal.SIGTERM]


# The grandchild writes its report ($3) once its handlers are installed.
GROUP_SCRIPT = """trap '' USR1 HUP; PROBE_OUT="$3" "$0" --signal-log "$1" --sleep 20 >/dev/null & echo $! > "$2"; wait"""


@pytest.mark.parametrize("group", [True, False])
def test_group_reaches_a_grandchild(start, tmp_path, group):
    """Every wait is for the state asserted next, none for time: the
    grandchild's report says its handlers are in; without --group, sh is
    stopped by prebind's SIGTERM while the grandchild still runs (had the
    test ended the grandchild first, sh's 'wait' could return, and sh exit
    0, before the SIGTERM was forwarded), and a signal sent to the
    grandchild afterwards shows that SIGUSR1 never came: pending standard
    signals are delivered lowest number first."""
    log, pidfile, report = tmp_path / "signals", tmp_path / "pid", tmp_path / "report"
    p = start(["-q", *(["--group"] if group else []), "--", "sh", "-c", GROUP_SCRIPT, PROBE, str(log),
               str(pidfile), str(report)])
    assert wait_for(lambda: report.exists() and pidfile.exists() and pidfile.read_text().strip())
    grandchild = int(pidfile.read_text())
    p.send(signal.SIGUSR1)
    if group:
        assert wait_log(log, 1)
        assert read_log(log) == [signal.SIGUSR1]
        assert os.getpgid(grandchild) != os.getpgid(p.pid)
    p.send(signal.SIGTERM)
    assert p.wait() == 128 + signal.SIGTERM  # sh itself is killed by SIGTERM
    if not group:
        assert pid_alive(grandchild)
        os.kill(grandchild, signal.SIGUSR2)
        assert wait_log(log, 1)
        assert read_log(log) == [signal.SIGUSR2]
        os.kill(grandchild, signal.SIGTERM)
    assert wait_for(lambda: not pid_alive(grandchild))


def test_kill_after_escalates_against_a_command_ignoring_sigterm(start):
    p = start(["-q", "--kill-after=0.3s", "--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"])
    assert p.readline() == "ready"
    t0 = time.monotonic()
    p.send(signal.SIGTERM)
    assert p.wait() == 128 + signal.SIGKILL
    assert 0.25 < time.monotonic() - t0 < TIMEOUT


def test_without_kill_after_a_command_ignoring_sigterm_keeps_running(start):
    p = start(["-q", "--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"])
    assert p.readline() == "ready"
    child = int(open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()[0])
    p.send(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(timeout=1)
    os.kill(child, signal.SIGKILL)
    assert p.wait() == 128 + signal.SIGKILL


def test_kill_after_with_group_kills_the_grandchildren(start, tmp_path):
    pidfile = tmp_path / "pid"
    p = start(["-q", "--group", "--kill-after=200ms", "--", "sh", "-c",
               f"trap '' TERM; sleep {TIMEOUT} & echo $! > {pidfile}; wait; wait"])
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip())
    grandchild = int(pidfile.read_text())
    p.send(signal.SIGTERM)
    assert p.wait() == 128 + signal.SIGKILL
    assert wait_for(lambda: not pid_alive(grandchild))


def test_success_status_maps_a_code_to_zero():
    assert run(["-q", "--success-status=143", "--", "sh", "-c", "kill -s TERM $$"]).returncode == 0
    assert run(["-q", "--success-status=143", "--success-status=3", "--", "sh", "-c", "exit 3"]).returncode == 0
    assert run(["-q", "--success-status=143", "--", "sh", "-c", "exit 4"]).returncode == 4


def test_exec_rejects_supervisor_options():
    for option in ("--group", "--kill-after=1", "--die-with-parent", "--subreaper", "--success-status=1"):
        out = run(["--exec", option, "--", "true"])
        assert out.returncode == 125 and "--exec leaves no supervisor" in out.stderr


def test_pid1_in_a_pid_namespace_reaps_100_orphans_and_passes_the_status(tmp_path):
    script = f"""
    [ "$(cat /proc/1/comm)" = prebind ] || {{ echo "pid 1 is $(cat /proc/1/comm)"; exit 90; }}
    for i in $(seq 100); do (sleep 0.05 &) ; done
    for i in $(seq 200); do
        z=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)
        [ "$z" -eq 0 ] && [ "$(ls -d /proc/[0-9]* | wc -l)" -le 6 ] && exit 42
        sleep 0.05
    done
    echo "zombies left: $z"; exit 91
    """
    need_unshare("--pid", "--fork", "--mount-proc")
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PREBIND, "-q", "--", "sh", "-c", script],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 42, out.stdout + out.stderr


def test_pid1_forwards_signals(tmp_path):
    log = tmp_path / "signals"
    need_unshare("--pid", "--fork", "--mount-proc")
    u = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", PREBIND, "-q", "--", PROBE,
                          "--signal-log", str(log), "--sleep", str(TIMEOUT)], stdout=subprocess.PIPE)
    try:
        u.stdout.readline()  # probe ready
        children = open(f"/proc/{u.pid}/task/{u.pid}/children").read().split()
        prebind = int(children[0])  # PID 1 inside, an ordinary pid outside
        os.kill(prebind, signal.SIGUSR2)
        assert wait_log(log, 1)
        os.kill(prebind, signal.SIGTERM)
        assert u.wait(timeout=TIMEOUT) == 0
        assert read_log(log) == [signal.SIGUSR2, signal.SIGTERM]
    finally:
        if u.poll() is None:
            u.kill()
        u.stdout.close()


def test_subreaper_adopts_orphans_and_does_not_wait_for_them(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    out = run(["-q", "--subreaper", "--", "sh", "-c",
               f"(sleep {TIMEOUT} >/dev/null 2>&1 & echo $! > {pidfile}); "
               f"while [ ! -s {pidfile} ]; do sleep 0.01; done; "
               f"ppid=$(awk '/^PPid/ {{print $2}}' /proc/$(cat {pidfile})/status); "
               "[ \"$ppid\" = \"$PPID\" ] && exit 5; exit 6"])
    orphan = int(pidfile.read_text())
    os.kill(orphan, signal.SIGKILL)
    # The orphan was adopted by prebind (COMMAND's parent), and prebind
    # exited with COMMAND without waiting for it.
    assert out.returncode == 5
    assert time.monotonic() - t0 < TIMEOUT / 2


def test_parent_death_stops_command_and_removes_the_port_file(tmp_path):
    pf = tmp_path / "port"
    runner = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys
p = subprocess.Popen([{PREBIND!r}, "-q", "--die-with-parent", "--port-file={pf}", "--", "sleep", "{TIMEOUT}"])
print(p.pid, flush=True)
p.wait()
"""], stdout=subprocess.PIPE, text=True)
    prebind = int(runner.stdout.readline())
    assert wait_for(pf.exists)
    child = int(open(f"/proc/{prebind}/task/{prebind}/children").read().split()[0])
    runner.kill()  # the test runner crashes
    runner.wait(timeout=TIMEOUT)
    runner.stdout.close()
    assert wait_for(lambda: not pid_alive(child) and not pf.exists(), timeout=10)
    assert wait_for(lambda: not pid_alive(prebind), timeout=10)


def test_print_into_a_pipe_closed_early(tmp_path):
    log, pf = tmp_path / "signals", tmp_path / "port"
    p = subprocess.Popen([PREBIND, "-q", "--print", f"--port-file={pf}", "--", PROBE, "--signal-log", str(log),
                          "--sleep", str(TIMEOUT)], stdout=subprocess.PIPE,
                         env=dict(os.environ, PROBE_OUT=str(tmp_path / "report")))
    try:
        port = int(p.stdout.readline())  # like "| head -1": read one line, then go away
        p.stdout.close()
        assert port > 0 and wait_for((tmp_path / "report").exists)
        p.send_signal(signal.SIGUSR1)  # prebind still supervises
        assert wait_log(log, 1)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert read_log(log) == [signal.SIGUSR1, signal.SIGTERM]  # no SIGPIPE reached COMMAND
    assert not pf.exists()


def run_in_pty(args, tmp_path):
    """prebind as the foreground job of a new terminal; returns (pid, master fd)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execv(PREBIND, [PREBIND, *args])
        finally:
            os._exit(99)
    return pid, master


def test_ctrl_c_in_a_terminal_reaches_command_once(tmp_path):
    log, report = tmp_path / "signals", tmp_path / "report"
    os.environ["PROBE_OUT"] = str(report)
    try:
        pid, master = run_in_pty(["-q", "--", PROBE, "--signal-log", str(log), "--sleep", str(TIMEOUT)], tmp_path)
    finally:
        del os.environ["PROBE_OUT"]
    try:
        assert wait_for(report.exists)
        os.write(master, b"\x03")  # Ctrl-C: SIGINT to the foreground process group
        assert wait_log(log, 1)
        # A forwarded duplicate would arrive within this time.
        assert_nothing_within(0.5, "a second signal", lambda: len(read_log(log)) > 1)
        assert read_log(log) == [signal.SIGINT]
        os.write(master, b"\x1a")  # Ctrl-Z: COMMAND (which handles it) and prebind stop
        assert wait_log(log, 2)
        assert wait_for(lambda: open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T")
        os.kill(pid, signal.SIGCONT)  # as "fg" would; prebind continues and forwards it
        assert wait_log(log, 3)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert read_log(log) == [signal.SIGINT, signal.SIGTSTP, signal.SIGCONT, signal.SIGTERM]
    finally:
        os.close(master)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

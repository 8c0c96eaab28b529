"""Exit statuses: COMMAND's own, 128+N for a signal, 126/127 for exec
failures told apart from a COMMAND that exits 127 itself; basic signal
forwarding."""

import os
import signal
import stat
import subprocess

import pytest

from conftest import PREBIND, PROBE, TIMEOUT, run, wait_for


def test_every_exit_code_is_passed_on():
    script = 'for c in $(seq 0 255); do "$PREBIND" -q -- sh -c "exit $c"; echo $?; done'
    out = subprocess.run(["bash", "-c", script], env=dict(os.environ, PREBIND=PREBIND), capture_output=True,
                         text=True, timeout=120)
    assert [int(c) for c in out.stdout.split()] == list(range(256))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL,
                                 signal.SIGUSR1, signal.SIGSEGV])
def test_killed_by_signal_is_128_plus_n(sig):
    out = run(["-q", "--", "sh", "-c", f"kill -s {sig.name[3:]} $$"])
    assert out.returncode == 128 + sig, out.stderr


def test_missing_command_is_127_with_one_line():
    out = run(["-q", "--", "prebind-no-such-command-xyz"])
    assert out.returncode == 127
    assert out.stderr.splitlines() == ["prebind: cannot run 'prebind-no-such-command-xyz': "
                                       "No such file or directory"]


def test_not_executable_is_126(tmp_path):
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\necho hi\n")
    f.chmod(stat.S_IRUSR | stat.S_IWUSR)
    out = run(["-q", "--", str(f)])
    assert out.returncode == 126
    assert out.stderr.splitlines() == [f"prebind: cannot run '{f}': Permission denied"]
    out = run(["-q", "--", str(tmp_path)])  # a directory
    assert out.returncode == 126


def test_command_exiting_127_itself_is_not_mistaken_for_not_found():
    out = run(["-q", "--", "sh", "-c", "exit 127"])
    assert out.returncode == 127
    assert out.stderr == ""


def test_exec_mode_reports_exec_failures_too():
    assert run(["-q", "--exec", "--", "prebind-no-such-command-xyz"]).returncode == 127
    assert run(["-q", "--exec", "--", "sh", "-c", "exit 9"]).returncode == 9


def test_basic_signals_are_forwarded_exactly_once(start, tmp_path):
    log = tmp_path / "signals"
    p = start(["-q", "--", PROBE, "--signal-log", str(log), "--sleep", str(TIMEOUT)])
    p.readline()  # the probe's report: its handlers are installed
    sent = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2]
    for sig in sent:
        p.send(sig)
        assert wait_for(lambda: log.exists() and log.read_text().split().count(str(int(sig))) == 1)
    p.send(signal.SIGTERM)
    assert p.wait() == 0
    assert [int(s) for s in log.read_text().split()] == [int(s) for s in sent + [signal.SIGTERM]]

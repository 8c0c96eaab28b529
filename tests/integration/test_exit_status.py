"""Exit statuses: COMMAND's own, 128+N for a signal, 126/127 for exec
failures told apart from a COMMAND that exits 127 itself; basic signal
forwarding."""

import ctypes
import os
import shutil
import signal
import stat
import subprocess
import time

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


def watch_events(path, mask):
    """An inotify watch on path for the events in mask, until the returned
    function is called (it returns the name of each event: "" for the
    file watched itself)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    assert libc.inotify_add_watch(fd, os.fsencode(path), mask) >= 0

    def names():
        found = []
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    return found
                while data:
                    length = int.from_bytes(data[12:16], "little")
                    found.append(data[16:16 + length].rstrip(b"\0").decode())
                    data = data[16 + length:]
        finally:
            os.close(fd)
    return names


def directory_events(directory):
    """Every file created or renamed into directory (watch_events())."""
    in_create, in_moved_to = 0x100, 0x80
    return watch_events(directory, in_create | in_moved_to)


@pytest.mark.parametrize("mode", [[], ["--accept"], ["--exec"]], ids=["supervise", "accept", "exec"])
@pytest.mark.parametrize("case", ["missing", "not-executable"])
def test_command_that_cannot_run_publishes_nothing(tmp_path, mode, case):
    """A client must never be handed an address nobody will serve: the
    addresses go out once COMMAND's exec has been tried (with --accept,
    once it has been found), so a failed one leaves one line, 126/127,
    no port file (not even for a moment) and nothing on stdout."""
    watched = tmp_path / "out"
    watched.mkdir()
    command = str(tmp_path / "srv")
    if case == "not-executable":
        (tmp_path / "srv").write_text("#!/bin/sh\n")
    status, why = (127, "No such file or directory") if case == "missing" else (126, "Permission denied")
    events = directory_events(watched)
    out = run([*mode, "--print", f"--port-file={watched}/port", "--", command])
    assert (out.returncode, out.stderr, out.stdout) == (status, f"prebind: cannot run '{command}': {why}\n", "")
    assert events() == [] and os.listdir(watched) == []


@pytest.mark.parametrize("mode", [[], ["--exec"]], ids=["supervise", "exec"])
def test_signals_during_the_trial_exec_do_not_hang_it(mode):
    """The trial exec's grandchild is traced: any signal that reaches it
    (a terminal's SIGWINCH to the foreground group, here a flood of them)
    stops it until its tracer lets it go on. prebind must still start
    COMMAND every time. A PATH of 4000 missing directories makes the
    trial long enough for the signals to land in it."""
    env = dict(os.environ, PATH=":".join(f"/nonexistent-{i}" for i in range(4000)) + ":/usr/bin:/bin")
    for _ in range(20):
        p = subprocess.Popen([PREBIND, *mode, "--print", "--", "true"], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + TIMEOUT
            while p.poll() is None and time.monotonic() < deadline:
                try:
                    os.killpg(p.pid, signal.SIGWINCH)
                except ProcessLookupError:
                    break
            assert p.wait(timeout=TIMEOUT) == 0, p.stderr.read()
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            p.stdout.close()
            p.stderr.close()


@pytest.mark.parametrize("publishing,execs", [([], 1), (["--port-file={dir}/port"], 2), (["--print"], 2)],
                         ids=["nothing", "port-file", "print"])
def test_command_is_executed_once_unless_the_addresses_must_come_first(tmp_path, publishing, execs):
    """The trial exec (a traced grandchild, killed at the exec) is for
    addresses that must be out before COMMAND runs: --print, which must
    beat COMMAND to stdout, and a port file or fd, whose failure must
    leave COMMAND unrun. With nothing to publish (-q alone) the real exec
    is the only one. Each exec opens and closes the file: two events
    (inotify merges only identical events in a row)."""
    srv = tmp_path / "srv"
    shutil.copy("/usr/bin/true", srv)
    in_open, in_close_nowrite = 0x20, 0x10
    events = watch_events(srv, in_open | in_close_nowrite)
    out = run(["-q", *(a.format(dir=tmp_path) for a in publishing), "--", str(srv)])
    assert (out.returncode, out.stderr, events()) == (0, "", ["", ""] * execs)


def test_restart_whose_exec_fails_ends_with_its_status(tmp_path):
    """--restart cannot bring back a COMMAND that is gone: the restart's
    exec fails, prebind says so in one line, exits 127 and takes back
    what it published, instead of restarting in a loop."""
    srv, port_file = tmp_path / "srv", tmp_path / "port"
    srv.write_text('#!/bin/sh\nrm -- "$0"\nexit 1\n')
    srv.chmod(0o755)
    out = run(["-q", "--restart=always", f"--port-file={port_file}", "--", str(srv)])
    assert (out.returncode, out.stderr) == (127, f"prebind: cannot run '{srv}': No such file or directory\n")
    assert os.listdir(tmp_path) == []


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

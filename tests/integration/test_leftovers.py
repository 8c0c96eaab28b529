"""Leave nothing behind (issue 15): when COMMAND is gone for good, no copy
of prebind's listening socket left in another process keeps accepting
clients into a backlog nobody serves, and with --group nothing of
COMMAND's process group keeps running.

The leftover is a background process of COMMAND that holds fd 3 (the
socket) and never accepts: exactly what a daemonizing server or a shell
wrapper without exec leaves. Without prebind's shutdown() the kernel would
complete every handshake into that backlog and clients would hang."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, need_unshare, pid_alive, run, wait_for

# A COMMAND that leaves a background process holding the socket (fd 3) and
# writes its pid to $1, then exits with status 3.
LEAVE_HOLDER = 'sleep 30 <&- >&- 2>&- & echo $! > "$1"; exit 3'


def read_pid(path):
    assert wait_for(lambda: os.path.exists(path) and open(path).read().strip()), f"no pid in {path}"
    return int(open(path).read())


def kill_quietly(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def connect_outcome(port, family=socket.AF_INET, address=None, timeout=1.0):
    """What a new client gets within timeout: 'refused', 'reset', 'closed'
    (EOF), or 'hang' (connected, then nothing)."""
    c = socket.socket(family, socket.SOCK_STREAM)
    c.settimeout(timeout)
    try:
        c.connect(address or ("127.0.0.1", port))
        return "closed" if c.recv(1) == b"" else "data"
    except ConnectionRefusedError:
        return "refused"
    except ConnectionResetError:
        return "reset"
    except (TimeoutError, socket.timeout):
        return "hang"
    finally:
        c.close()


@contextlib.contextmanager
def prebind_with_holder(args, pidfile):
    """prebind running COMMAND that leaves a holder (its pid in pidfile):
    yields the Popen; the holder and prebind never outlive
    the test."""
    p = subprocess.Popen([PREBIND] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
        if os.path.exists(pidfile) and open(pidfile).read().strip():
            kill_quietly(int(open(pidfile).read()))


def holder_case(tmp_path, extra):
    pidfile = str(tmp_path / "holder.pid")
    out = run(["-q", "--print", *extra, "--", "sh", "-c", LEAVE_HOLDER, "sh", pidfile])
    holder = read_pid(pidfile)
    return out, holder


@pytest.mark.parametrize("extra", [[], ["--group"]], ids=["plain", "group"])
def test_a_leftover_holding_the_socket_does_not_accept_after_prebind_exits(tmp_path, extra):
    out, holder = holder_case(tmp_path, extra)
    try:
        assert out.returncode == 3, out.stderr  # COMMAND's status
        port = int(out.stdout.split()[0])
        if not extra:
            # The leftover still runs (prebind only owns what it started)
            # and still holds the socket: yet it is shut down.
            assert pid_alive(holder)
            assert "socket:" in os.readlink(f"/proc/{holder}/fd/3")
        assert connect_outcome(port) in ("refused", "reset")
    finally:
        kill_quietly(holder)


def test_clients_queued_in_the_backlog_are_reset_not_left_hanging(tmp_path):
    """Clients connect while COMMAND runs and never accepts; when it exits
    (its leftover still holding the socket), every queued client is reset."""
    pidfile = str(tmp_path / "holder.pid")
    gate = str(tmp_path / "gate")
    script = LEAVE_HOLDER.replace("exit 3", f'while [ ! -e {gate} ]; do sleep 0.05; done; exit 3')
    queued = []
    with prebind_with_holder(["-q", "--print", "--", "sh", "-c", script, "sh", pidfile], pidfile) as p:
        try:
            port = int(p.stdout.readline())
            read_pid(pidfile)
            for _ in range(5):
                c = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)  # completes into the backlog
                c.settimeout(2)
                queued.append(c)
            open(gate, "w").close()
            assert p.wait(timeout=TIMEOUT) == 3
            for c in queued:
                with pytest.raises(ConnectionResetError):
                    c.recv(1)  # a hang would raise TimeoutError instead
            assert connect_outcome(port) in ("refused", "reset")
        finally:
            for c in queued:
                c.close()


def test_unix_socket_queued_clients_are_closed_and_new_ones_refused(tmp_path):
    pidfile = str(tmp_path / "holder.pid")
    gate = str(tmp_path / "gate")
    path = str(tmp_path / "s.sock")
    script = LEAVE_HOLDER.replace("exit 3", f'while [ ! -e {gate} ]; do sleep 0.05; done; exit 3')
    c = socket.socket(socket.AF_UNIX)
    with prebind_with_holder(["-q", "--print", "-l", path, "--", "sh", "-c", script, "sh", pidfile], pidfile) as p:
        try:
            assert p.stdout.readline().strip() == path
            read_pid(pidfile)
            c.connect(path)
            c.settimeout(2)
            open(gate, "w").close()
            assert p.wait(timeout=TIMEOUT) == 3
            assert c.recv(1) == b""  # closed at once, not a hang
            assert not os.path.exists(path)  # the socket file is gone too
        finally:
            c.close()


def test_accept_mode_leaves_no_socket_accepting(tmp_path):
    """--accept: a handler's leftover holds its connection, never the
    listening socket; after prebind stops, clients are refused."""
    pidfile = str(tmp_path / "holder.pid")
    with prebind_with_holder(["-q", "--print", "--accept", "--", "sh", "-c", LEAVE_HOLDER, "sh", pidfile],
                             pidfile) as p:
        port = int(p.stdout.readline())
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
        read_pid(pidfile)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=TIMEOUT) == 0
        assert connect_outcome(port) in ("refused", "reset")


def test_as_pid_1_in_a_pid_namespace(tmp_path):
    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and unshare")
    need_unshare("--pid", "--fork", "--mount-proc")
    pidfile = str(tmp_path / "holder.pid")
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PREBIND, "-q", "--print", "--",
                          "sh", "-c", LEAVE_HOLDER, "sh", pidfile],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 3, out.stderr
    assert connect_outcome(int(out.stdout.split()[0])) in ("refused", "reset")


def test_restart_keeps_the_socket_for_the_next_command(tmp_path):
    """The socket is given up only for good: across a --restart, a client
    queued while no COMMAND runs is served by the next one."""
    server = ("import os, socket, sys\n"
              "s = socket.socket(fileno=3)\n"
              "c, _ = s.accept(); c.sendall(b'served %d' % os.getpid()); c.close()\n"
              "sys.exit(1)\n")
    p = subprocess.Popen([PREBIND, "-q", "--print", "--restart=always", "--restart-delay=300ms",
                          "--restart-limit=0", "--", PYTHON, "-c", server],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        answers = []
        for _ in range(3):  # each COMMAND serves one client, then exits
            with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as c:
                c.settimeout(TIMEOUT)
                answers.append(c.recv(100))
        assert all(a.startswith(b"served ") for a in answers), answers
        assert len(set(answers)) == 3  # three COMMANDs
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=TIMEOUT)
        p.stdout.close()
        p.stderr.close()


def test_group_stops_the_rest_of_the_group_when_command_exits(tmp_path):
    """--group without --kill-after: the group gets SIGTERM at once."""
    pidfile = str(tmp_path / "member.pid")
    out = run(["-q", "--group", "--", "sh", "-c", 'sleep 30 & echo $! > "$1"; exit 5', "sh", pidfile])
    member = read_pid(pidfile)
    try:
        assert out.returncode == 5, out.stderr
        assert wait_for(lambda: not pid_alive(member), timeout=5), "the group member still runs"
    finally:
        kill_quietly(member)


def test_group_member_ignoring_sigterm_is_killed_after_kill_after(tmp_path):
    pidfile = str(tmp_path / "member.pid")
    member_script = 'trap "" TERM; echo $$ > "$1"; while :; do sleep 0.1; done'
    started = time.monotonic()
    out = run(["-q", "--group", "--kill-after=1s", "--", "sh", "-c",
               f'sh -c \'{member_script}\' sh "$1" & while [ ! -s "$1" ]; do sleep 0.05; done; exit 7',
               "sh", pidfile])
    elapsed = time.monotonic() - started
    member = read_pid(pidfile)
    try:
        assert out.returncode == 7, out.stderr  # COMMAND's status, not the group's
        # SIGKILLed before prebind ended, it runs no more code, but on a
        # busy machine it may not have exited yet when prebind has: its
        # exit is waited for (bounded), not looked for once.
        assert wait_for(lambda: not pid_alive(member), timeout=5), "a member of the group is left running"
        # It waited for --kill-after before the SIGKILL (not a timed
        # assertion on speed: a lower bound that only a skipped wait breaks).
        assert elapsed >= 0.9
    finally:
        kill_quietly(member)


def test_group_member_that_honours_sigterm_ends_the_wait_early(tmp_path):
    """With --kill-after, prebind waits for the group, and stops waiting as
    soon as it is gone (it does not sit out the whole --kill-after)."""
    pidfile = str(tmp_path / "member.pid")
    out = run(["-q", "-v", "--group", "--kill-after=30s", "--", "sh", "-c",
               'sleep 60 & echo $! > "$1"; exit 0', "sh", pidfile], timeout=25)
    member = read_pid(pidfile)
    try:
        assert out.returncode == 0, out.stderr
        assert not pid_alive(member)
        assert "sending SIGKILL" not in out.stderr
    finally:
        kill_quietly(member)


def test_kill_after_always_grants_its_grace():
    """Issue 20: one epoll_wait() returned the signalfd and COMMAND's pidfd;
    reaping COMMAND closed the pidfd, the kill timer's timerfd got its
    number, and the stale pidfd event fired the timer at once: the member
    was SIGKILLed with no grace (30 of 60 runs with the pid file on tmpfs).
    100 runs: the member always ends by SIGTERM."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    deadline = time.monotonic() + 120
    runs = 0
    with tempfile.TemporaryDirectory(dir=shm) as d:
        pidfile = os.path.join(d, "member.pid")
        while runs < 100 and time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pidfile)
            out = run(["-q", "-v", "--group", "--kill-after=10s", "--", "sh", "-c",
                       'sleep 60 & echo $! > "$1"; exit 0', "sh", pidfile], timeout=25)
            member = read_pid(pidfile)
            kill_quietly(member)
            assert out.returncode == 0, out.stderr
            assert "sending SIGKILL" not in out.stderr, f"run {runs}: {out.stderr}"
            runs += 1
    assert runs >= 50, f"only {runs} runs in the time budget"


def test_verbose_does_not_report_a_command_that_could_not_run_as_ended():
    out = run(["-v", "--", "/nonexistent/command"])
    assert out.returncode == 127
    assert "cannot run '/nonexistent/command'" in out.stderr
    assert "ended, exit status" not in out.stderr

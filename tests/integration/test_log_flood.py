"""Another user floods the notify socket (issue 19, point 3).

Every datagram that is not COMMAND's used to write one line on stderr,
without limit. With prebind's stderr a pipe whose reader stalls (a
fixture's Popen(stderr=PIPE) that only reads stdout), prebind then
blocked in write(2) and its whole loop stopped: no --ready-timeout, no
SIGTERM, no reaping. Now the lines are rate-limited, and a write that
would block is dropped and counted.

The stall is real: the test fills the pipe once COMMAND runs (through a
private, non-blocking open of it, so that the file description prebind
and COMMAND share stays blocking), and reads it only once prebind has
exited. The flood comes from another user."""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, command_child, environ_of, public_prebind, read_within, wait_for

NOBODY = 65534
SLACK = 2.0  # seconds: how late prebind may act on a timeout or a signal
WRAPPED = bool(os.environ.get("PREBIND_WRAPPER"))  # valgrind: slower
if WRAPPED:
    SLACK = 6.0

# The other user: datagrams to prebind's notify socket until killed (or
# for a bounded time).
FLOODER = r"""
import os, select, socket, sys, time
address, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
deadline = time.monotonic() + seconds
n = 0
try:
    # Connected: poll() then says when prebind's queue has room again.
    s.connect("\0" + address[1:])
    while time.monotonic() < deadline:
        try:
            s.send(b"READY=1")
            n += 1
        except BlockingIOError:
            select.select([], [s], [], 0.1)
except OSError:  # ECONNREFUSED: prebind is gone
    pass
print(n, flush=True)
"""


@pytest.fixture(scope="module")
def nobody():
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to nobody")
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


def drain(fd, timeout=5):
    """Everything left in the pipe once prebind and COMMAND are gone."""
    data, deadline = b"", time.monotonic() + timeout
    while chunk := read_within(fd, deadline):
        data += chunk
    return data


class Flooded:
    """prebind --ready (as root, or as nobody: then the private reopen of
    a pipe root made is refused and prebind falls back to polling) with
    a sleeper as COMMAND, stderr a pipe that the test fills and does not
    read, and a flood of notifications from another user."""

    def __init__(self, nobody, options, as_nobody=False):
        kwargs = {}
        prebind = PREBIND
        if as_nobody:
            prebind, kwargs = public_prebind(), nobody
        self.read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            self.p = subprocess.Popen([prebind, *options, "--", PYTHON, "-c", "import time; time.sleep(120)"],
                                      stdout=subprocess.DEVNULL, stderr=write_fd, **kwargs)
            self.filler = os.open(f"/proc/self/fd/{write_fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        finally:
            os.close(write_fd)
        self.flooders = []
        self.nobody = nobody
        self.as_nobody = as_nobody
        # Not the first child: that may be the guard's short-lived intermediate.
        child = command_child(self.p.pid, "NOTIFY_SOCKET")
        assert child, "COMMAND did not start"
        self.address = wait_for(lambda: environ_of(child).get("NOTIFY_SOCKET"))
        assert self.address, "COMMAND has no NOTIFY_SOCKET"
        self.fill()

    def close_filler(self):
        if self.filler is not None:
            os.close(self.filler)
            self.filler = None

    def fill(self):
        """Fill the pipe to the last byte without blocking (with empty
        lines: what prebind writes after them starts a line)."""
        for chunk in (4096, 1):
            while True:
                try:
                    os.write(self.filler, b"\n" * chunk)
                except BlockingIOError:
                    break

    def flood(self, seconds):
        # The flooder is the other user: nobody against root's prebind,
        # root against nobody's.
        kwargs = {} if self.as_nobody else self.nobody
        f = subprocess.Popen([PYTHON, "-c", FLOODER, self.address, str(seconds)], stdout=subprocess.PIPE,
                             **kwargs)
        self.flooders.append(f)
        return f

    def wait(self, bound):
        """prebind's exit status, or None if it is still running after bound seconds."""
        try:
            return self.p.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        """Stop everything; what prebind left in the pipe."""
        if self.p.poll() is None:
            self.p.kill()  # SIGKILL: a prebind blocked in write(2) ignores nothing else
            self.p.wait(timeout=TIMEOUT)
        # The socket is gone with prebind: the flooders stop and report.
        for f in self.flooders:
            try:
                out, _ = f.communicate(timeout=5)
                f.sent = int(out)
            except subprocess.TimeoutExpired:
                f.kill()
                f.communicate(timeout=TIMEOUT)
                f.sent = None
        self.close_filler()
        err = drain(self.read_fd)
        os.close(self.read_fd)
        return err


def sent(flooder):
    if flooder.returncode is None:
        out, _ = flooder.communicate(timeout=TIMEOUT)
        flooder.sent = int(out)
    return flooder.sent


def check_stderr(err):
    text = err.decode(errors="replace")
    ours = [line for line in text.split("\n") if line.startswith("prebind: ")]
    ignored = [line for line in ours if "ignoring a notification" in line]
    assert len(ignored) <= 5, ours[:20]
    assert len("\n".join(ours)) < 4096, ours[:20]
    return ours


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root", "nobody"])
def test_ready_timeout_is_honoured_during_a_flood_with_stderr_stalled(nobody, as_nobody):
    job = Flooded(nobody, ["--ready", "--ready-timeout=3s"], as_nobody)
    started = time.monotonic()
    try:
        flooder = job.flood(30)
        status = job.wait(3 + SLACK)
        elapsed = time.monotonic() - started
    finally:
        err = job.close()
    assert status == 124, f"prebind still running {elapsed:.1f}s into a 3s --ready-timeout"
    assert sent(flooder) > 100, "the flood was not read: prebind stalled"
    check_stderr(err)


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root", "nobody"])
def test_sigterm_is_honoured_during_a_flood_with_stderr_stalled(nobody, as_nobody):
    job = Flooded(nobody, ["--ready=120s"], as_nobody)
    try:
        flooder = job.flood(30)
        # Until well after the pipe would have filled with the lines of
        # an unlimited log (about 800 lines fill 64 KiB).
        assert wait_for(lambda: flooder.poll() is not None, timeout=1.5) is False
        job.p.send_signal(signal.SIGTERM)
        status = job.wait(SLACK)
    finally:
        err = job.close()
    assert status == 128 + signal.SIGTERM, "SIGTERM not acted on within 2s during the flood"
    assert sent(flooder) > 100, "the flood was not read: prebind stalled"
    check_stderr(err)


def test_flood_is_summarised_and_dropped_lines_are_said_once_the_pipe_drains(nobody):
    """The pipe stalls, then drains: the lines that could not be written
    are counted and said, and the rate limiter's count comes at exit."""
    job = Flooded(nobody, ["--ready=120s"])
    try:
        flooder = job.flood(2)
        n = sent(flooder)
        assert n > 100, "the flood was not read: prebind stalled"
        # Drain what COMMAND wrote: from now on prebind can write.
        fd = job.read_fd
        os.set_blocking(fd, False)
        got = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            got += chunk
        assert got.count(b"\n") >= 4096
        job.close_filler()
        job.p.send_signal(signal.SIGTERM)
        status = job.wait(SLACK)
    finally:
        err = job.close()
    assert status == 128 + signal.SIGTERM
    ours = check_stderr(got + err)
    assert any("log lines dropped: stderr was not writable" in line or
               "log line dropped: stderr was not writable" in line for line in ours), ours
    summaries = [re.search(r"prebind: (\d+) more ignored notifications in the last (\d+)s$", line) for line in ours]
    summaries = [m for m in summaries if m]
    assert len(summaries) == 1, ours
    held, seconds = map(int, summaries[0].groups())
    # All but the first 5 of the flood, within the one interval it lasted.
    assert held > 100 and held <= n and 1 <= seconds <= 10, ours


def full_pipe():
    """A pipe filled to its last byte, whose reader never reads: (read
    end, write end)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for size in (4096, 1):
        try:
            while True:
                os.write(w, b"x" * size)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)
    return r, w


def test_a_restart_loop_waits_for_a_stalled_stderr_once(tmp_path):
    """The lines about each exit wait for stderr's reader (they follow
    COMMAND's last output), but a wait that ran out means the reader
    stalled: a COMMAND that exits again and again is restarted at its own
    pace from then on, and SIGTERM is acted on at once, not after
    another 3 s wait per exit."""
    runs = tmp_path / "runs"
    runs.touch()
    r, w = full_pipe()
    try:
        p = subprocess.Popen([PREBIND, "--restart=always", "--restart-delay=10ms", "--restart-limit=0", "--",
                              "sh", "-c", f"echo x >> {runs}; exit 1"], stdout=subprocess.DEVNULL, stderr=w)
        try:
            # One wait of LOG_STALL_MS (3 s), then restarts every few ms:
            # a wait per exit would make it one every 3 s.
            assert wait_for(lambda: len(runs.read_text().split()) >= 20, timeout=3 + 5 * SLACK), \
                f"{len(runs.read_text().split())} runs: each exit waited for stderr"
            p.send_signal(signal.SIGTERM)
            # COMMAND's status: killed by it, or the last exit's, had it
            # just exited.
            assert p.wait(timeout=SLACK) in (1, 128 + signal.SIGTERM)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(TIMEOUT)
    finally:
        os.close(r)
        os.close(w)


# The other user again, but from processes at the bottom of a deep chain
# (each datagram or claim then costs prebind a walk up the whole chain
# in /proc, milliseconds), sending as fast as the kernel takes them: the
# queue is never empty. Every message was read in one go
# (the notify check's read loop, the broker's accept_all()) until the queue
# was empty, so the loop never came back to its timers and signals while
# the flood lasted.
DEEP_FLOODER = r"""
import os, socket, struct, sys, time
address, seconds, senders, depth, kind = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
deadline = time.monotonic() + seconds
claim = struct.pack("=IIiiI112s", 1, 1, socket.AF_INET, socket.SOCK_STREAM, 8000, b"0.0.0.0")
def send():
    n = 0
    if kind == "notify":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if kind == "notify":
                s.sendto(b"READY=1", "\0" + address[1:])
            else:
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
                    c.settimeout(0.2)
                    c.connect("\0" + address[1:])
                    c.send(claim)
            n += 1
        except (BlockingIOError, TimeoutError, socket.timeout):
            pass
        except OSError:  # ECONNREFUSED: prebind is gone
            break
    return n
children = []
for _ in range(senders):
    pid = os.fork()
    if pid == 0:
        for _ in range(depth):  # a chain: the sender is depth levels down
            if os.fork() != 0:
                os.wait()
                os._exit(0)
        os._exit(0 if send() else 1)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def deep_flood(nobody, address, seconds, kind):
    return subprocess.Popen([PYTHON, "-c", DEEP_FLOODER, address, str(seconds), "2", "40", kind], **nobody)


@pytest.mark.parametrize("kind", ["notify", "broker"])
def test_loop_serves_its_timeout_and_signals_during_a_flood_from_deep_processes(nobody, kind):
    """Reproduction (as root, 2 cores): prebind --ready --ready-timeout=3s
    -- sleep 60, and as nobody 2 senders, each 40 processes deep, sending
    READY=1 to its NOTIFY_SOCKET for 12 s: prebind exited 124 after 13 s,
    not 3 s; --intercept=8000 and claims of 8000 over PREBIND_BROKER, the
    same."""
    env = dict(os.environ)
    if kind == "notify":
        options, key = ["--ready", "--ready-timeout=3s"], "NOTIFY_SOCKET"
    else:
        options, key = ["--intercept-via=preload", "--intercept=8000", "--ready-timeout=3s"], "PREBIND_BROKER"
    p = subprocess.Popen([PREBIND, *options, "--", PYTHON, "-c", "import time; time.sleep(120)"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    flooder = None
    try:
        child = command_child(p.pid, key)
        assert child, "COMMAND did not start"
        address = wait_for(lambda: environ_of(child).get(key))
        assert address, f"COMMAND has no {key}"
        started = time.monotonic()
        flooder = deep_flood(nobody, address, 15, kind)
        try:
            status = p.wait(timeout=3 + SLACK)
        except subprocess.TimeoutExpired:
            status = None
        elapsed = time.monotonic() - started
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=TIMEOUT)
        if flooder:
            flooder.kill()
            flooder.wait(timeout=TIMEOUT)
            # The senders, down their chains, end with the socket or the deadline.
    assert status == 124, f"prebind still running {elapsed:.1f}s into a 3s --ready-timeout during the flood"

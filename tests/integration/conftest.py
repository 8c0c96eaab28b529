"""Shared helpers for the integration tests: the real prebind binary
against real servers and clients. Every wait is bounded; no fixed ports."""

import array
import fcntl
import functools
import http.client
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import termios
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = os.path.join(HERE, "servers")
BUILD = os.path.join(HERE, "..", "..", "build")
# PREBIND_BUILT is this build's prebind; PREBIND, the binary under test, is
# the same unless meson's -Dprebind_under_test or PREBIND_UNDER_TEST names
# another (.ci/run: the static build's prebind-static, the installed .deb's).
PREBIND_BUILT = os.path.abspath(os.environ.get("PREBIND_BUILT", os.environ.get(
    "PREBIND", os.path.join(BUILD, "src", "prebind"))))
PREBIND = os.path.abspath(os.environ.get("PREBIND_UNDER_TEST") or os.environ.get("PREBIND", PREBIND_BUILT))
PROBE = os.path.abspath(os.environ.get("PROBE", os.path.join(BUILD, "tests", "helpers", "probe")))
INTERCEPT_CLIENT = os.path.abspath(os.environ.get("INTERCEPT_CLIENT", os.path.join(BUILD, "tests", "helpers",
                                                                                   "intercept-client")))
EXAMPLE_C_SERVER = os.path.abspath(os.environ.get(
    "EXAMPLE_C_SERVER", os.path.join(BUILD, "examples", "c", "prebind-example-c-server")))


def is_static(path):
    """True for an ELF executable without a program interpreter (no
    dynamic loader): what runs in an empty root."""
    import struct

    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only
            return False
        e_phoff, = struct.unpack_from("<Q", header, 0x20)
        e_phentsize, e_phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(e_phoff)
        table = f.read(e_phentsize * e_phnum)
    return all(struct.unpack_from("<I", table, i * e_phentsize)[0] != 3  # PT_INTERP
               for i in range(e_phnum))


@functools.cache
def unshare_refused(*options):
    """Why `unshare OPTIONS true` fails here, in unshare's own words, or
    None: asked once per set of options. A chroot whose / is not a mount
    point (as Debian package builds run tests) refuses a mount namespace
    ("cannot change root filesystem propagation"), so --mount and
    --mount-proc cannot work there, whatever prebind does."""
    if not shutil.which("unshare"):
        return "no unshare(1)"
    out = subprocess.run(["unshare", *options, "true"], capture_output=True, text=True, timeout=TIMEOUT)
    return None if out.returncode == 0 else out.stderr.strip() or f"unshare exited {out.returncode}"


def need_unshare(*options):
    """Skip the test, with unshare's message, where `unshare OPTIONS` fails."""
    why = unshare_refused(*options)
    if why:
        pytest.skip(f"unshare {' '.join(options)} fails here: {why}")


def pytest_report_header(config):
    kind = "static" if is_static(PREBIND_REAL) else "dynamic"
    return f"prebind under test: {PREBIND_REAL} ({kind})"


# Debian's interpreter: python3-uvicorn and python3-gunicorn belong to it.
PYTHON = "/usr/bin/python3"
TIMEOUT = 20  # seconds: the bound on every wait in these tests


def _wrap(binary, wrapper):
    """A script that execs `wrapper binary "$@"`: exec keeps the pid, so
    LISTEN_PID, signals and /proc reach prebind itself. In a directory of
    its own that any user can read (tests also run prebind as nobody)."""
    import atexit
    import shlex
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="prebind-wrapper-")
    os.chmod(directory, 0o755)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    script = os.path.join(directory, "prebind")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nexec {wrapper} {shlex.quote(binary)} \"$@\"\n")
    os.chmod(script, 0o755)
    return script


def _alias(binary):
    """A symlink named prebind to binary (prebind-static): the units and
    the scripts the tests run call it by that name from its directory. A
    symlink, not a script: the static binary must also run where there is
    no shell."""
    import atexit
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="prebind-alias-")
    os.chmod(directory, 0o755)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.symlink(binary, os.path.join(directory, "prebind"))
    return os.path.join(directory, "prebind")


# PREBIND_WRAPPER, a command prefix (.ci/analyze sets .ci/valgrind-wrapper): every
# prebind the tests start, nested ones and those run by shell scripts
# included, runs under it, and PREBIND names the wrapping script.
# PREBIND_REAL is always the binary.
PREBIND_REAL = PREBIND
if os.environ.get("PREBIND_WRAPPER"):
    PREBIND = _wrap(PREBIND_REAL, os.environ["PREBIND_WRAPPER"])
elif os.path.basename(PREBIND) != "prebind":
    PREBIND = _alias(PREBIND_REAL)


_public_copies = {}


def _public_copy(source, name):
    """A copy of source that any user can read and run, in a directory of
    its own under /tmp (removed at exit): the checkout (and the build) may
    sit where other users cannot reach, such as root's home (0700)."""
    if name not in _public_copies:
        import atexit
        import shutil
        import tempfile

        directory = tempfile.mkdtemp(prefix="prebind-public-")
        os.chmod(directory, 0o755)
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        copy = os.path.join(directory, name)
        shutil.copy(source, copy)
        os.chmod(copy, 0o755)
        _public_copies[name] = copy
    return _public_copies[name]


def public_prebind():
    """A copy of the binary for tests that run prebind as nobody. Not
    wrapped: the PREBIND_WRAPPER and its logs may be out of nobody's reach
    too."""
    return _public_copy(PREBIND_REAL, "prebind")


def public_interposer_env():
    """The environment for --intercept when COMMAND runs as another user
    (PostgreSQL as postgres): the dynamic loader opens the interposer as
    that user, so the build's copy, which may sit in root's home (0700),
    is copied where anyone can read it and named by
    PREBIND_INTERCEPT_LIBRARY. An installed prebind's library is in
    libdir: nothing to do then."""
    lib = os.environ.get("PREBIND_INTERCEPT_LIBRARY") or os.path.join(
        os.path.dirname(os.path.realpath(PREBIND_REAL)), "intercept", "libprebind-intercept.so")
    env = dict(os.environ)
    if os.path.exists(lib):
        env["PREBIND_INTERCEPT_LIBRARY"] = _public_copy(lib, "libprebind-intercept.so")
    return env


def read_within(fd, deadline):
    """One read of fd before deadline (time.monotonic()): its bytes, b"" at
    EOF, or None once the deadline has passed with nothing to read."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            if sel.select(left):
                return os.read(fd, 65536)


class Prebind:
    """A running prebind with its stdout as a pipe."""

    def __init__(self, args, **kwargs):
        self._run([PREBIND] + list(args), **kwargs)

    def _run(self, argv, **kwargs):
        """Start argv (prebind, or what runs it) with stdout and stderr as pipes."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        self.args = argv
        self.proc = subprocess.Popen(self.args, **kwargs)
        self._buffer = b""
        self._err_early = b""  # stderr read by wait_stderr(), while it runs
        self.err = ""  # stderr, once stop() or close() has collected it

    @property
    def pid(self):
        return self.proc.pid

    def readline(self, timeout=TIMEOUT):
        """One line of stdout, waiting at most timeout seconds."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            chunk = read_within(fd, deadline)
            if chunk is None:
                raise TimeoutError(f"no line from {self.args} within {timeout}s")
            if not chunk:
                raise EOFError(f"{self.args} closed stdout; stderr: {self.stderr_text()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def wait_stderr(self, text, count=1, timeout=TIMEOUT):
        """Wait until prebind has written text on stderr count times (an
        event to wait for instead of a sleep); returns stderr so far. What
        is read here is in self.err too once prebind is stopped."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stderr.fileno()
        while self._err_early.decode(errors="replace").count(text) < count:
            chunk = read_within(fd, deadline)
            if chunk is None:
                raise TimeoutError(f"{text!r} not {count} times on stderr within {timeout}s: "
                                   f"{self._err_early.decode(errors='replace')}")
            if not chunk:
                raise EOFError(f"stderr closed before {text!r}: {self._err_early.decode(errors='replace')}")
            self._err_early += chunk
        return self._err_early.decode(errors="replace")

    def stderr_text(self, timeout=5):
        """What prebind wrote on stderr (what wait_stderr() read included),
        once it has exited. Bounded: an orphan that still holds the pipe
        must not hang the test."""
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        fd, data = self.proc.stderr.fileno(), self._err_early
        self._err_early = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while time.monotonic() < deadline and sel.select(deadline - time.monotonic()):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        return data.decode(errors="replace")

    def send(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=TIMEOUT):
        return self.proc.wait(timeout=timeout)

    def stop(self, sig=signal.SIGTERM, timeout=TIMEOUT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self):
        """Stop prebind as a user would (SIGTERM, which it forwards), so no
        server is orphaned; SIGKILL only if that does not work."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=TIMEOUT)
        if self.proc.stderr and not self.proc.stderr.closed:
            self.err += self.stderr_text()
        for f in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if f:
                f.close()


@pytest.fixture
def start():
    """start(args) -> Prebind; every instance is killed at teardown."""
    started = []

    def _start(args, **kwargs):
        p = Prebind(args, **kwargs)
        started.append(p)
        return p

    yield _start
    for p in started:
        p.close()


def run(args, timeout=TIMEOUT, **kwargs):
    """Run prebind to completion; returns CompletedProcess with text output."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([PREBIND] + list(args), timeout=timeout, **kwargs)


def http_get(url_or_addr, path="/", timeout=TIMEOUT):
    """GET over http.client; url may be http://host:port or a unix:/path."""
    if url_or_addr.startswith("unix:"):
        conn = UnixHTTPConnection(url_or_addr[len("unix:"):], timeout=timeout)
    else:
        hostport = url_or_addr.split("://", 1)[-1].rstrip("/")
        conn = http.client.HTTPConnection(hostport, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect("\0" + self.unix_path[1:] if self.unix_path.startswith("@") else self.unix_path)
        self.sock = s


def curl(url, timeout=TIMEOUT):
    """GET with the real curl client."""
    out = subprocess.run(["curl", "-sS", "--max-time", str(timeout), url],
                         capture_output=True, text=True, timeout=timeout + 5)
    assert out.returncode == 0, out.stderr
    return out.stdout


def children(pid):
    """The pids of pid's children, as strings ([] once it is gone)."""
    try:
        return open(f"/proc/{pid}/task/{pid}/children").read().split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def wait_for(predicate, timeout=TIMEOUT, interval=0.02):
    """Poll predicate until true or timeout; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def assert_nothing_within(seconds, what=None, happened=None, interval=0.02):
    """An absence check: that something does not happen within seconds.
    No event marks that nothing happened, so this is the one wait of a
    fixed length the tests keep (every other wait is for its event):
    each caller says why its time is long enough. happened(), if given,
    is checked throughout and must stay false; what names it."""
    deadline = time.monotonic() + seconds
    while True:
        if happened is not None:
            assert not happened(), f"{what} within {seconds} s"
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(interval, left) if happened is not None else left)


def pipe_full(fd):
    """Whether the pipe whose end fd is holds all it can: its writer
    blocks (or gets EAGAIN)."""
    queued = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, queued)
    return queued[0] >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def blocked_writing_a_pipe(pid):
    """Whether process pid sleeps in write(2) to a full pipe (the
    kernel's function is pipe_write, anon_pipe_write since 6.x)."""
    try:
        return "pipe_write" in open(f"/proc/{pid}/wchan").read()
    except (FileNotFoundError, ProcessLookupError):
        return False


def child_of(pid):
    """The first child of pid, waited for (None if it has none in time)."""
    def first():
        try:
            return int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None
    return wait_for(first)


def environ_of(pid):
    """The environment pid was started with ({} if it is gone)."""
    try:
        return dict(e.split("=", 1) for e in open(f"/proc/{pid}/environ").read().split("\0") if "=" in e)
    except (FileNotFoundError, ProcessLookupError):
        return {}


def cpu_seconds(pid):
    """User and system time pid has spent, in seconds (a spin shows)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone meanwhile (ESRCH while it is being reaped)
        return False


def command_child(pid, variable):
    """The child of prebind pid that runs COMMAND: the one whose environment
    holds variable (one prebind sets for COMMAND, such as NOTIFY_SOCKET).
    Its first child alone may be the guard's short-lived intermediate
    (src/guard.c), or COMMAND before its exec. Waits up to TIMEOUT; None if
    there is none."""
    def find():
        try:
            children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except (FileNotFoundError, ProcessLookupError):
            return None
        for child in children:
            try:
                env = open(f"/proc/{child}/environ", "rb").read().split(b"\0")
            except (FileNotFoundError, ProcessLookupError):
                continue
            if any(e.startswith(variable.encode() + b"=") for e in env):
                return int(child)
        return None
    return wait_for(find)


def probe_json(text):
    return json.loads(text)


def server(name):
    return os.path.join(SERVERS, name)

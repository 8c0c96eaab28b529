"""Hostile input (issue 8): what a careless script, a broken activator, a
misbehaving COMMAND or another local user can throw at prebind.

Each bad input must give a clear error (one line on stderr, "prebind: …")
with the documented exit status (125: prebind failed), run no COMMAND and
leave nothing behind: no port file, no socket file, no temporary file.
Notifications that are not COMMAND's, or are garbage, are ignored without
a crash or a leaked fd. Files and sockets are never clobbered through a
symlink or in another user's place. Running out of fds or ports is a
one-line error too.

Some tests run prebind as the unprivileged user nobody (root ignores
file permissions) and in a private network namespace (unshare -n); they
are skipped where that is not possible."""

import array
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import types

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, assert_nothing_within, child_of, command_child, cpu_seconds, environ_of, pid_alive, \
    public_prebind, run, wait_for

NOBODY = 65534
WRAPPED = bool(os.environ.get("PREBIND_WRAPPER"))  # valgrind: fds and timing are not prebind's own
LONG = "x" * 5000

# ---- the table: options, addresses, names, templates, environment ---------

# Run prebind as if socket-activated: the fds listed become 3, 4, … and
# LISTEN_PID is prebind's own pid (the launcher execs it: same pid), unless
# the case sets LISTEN_PID itself.
LAUNCHER = r"""
import fcntl, json, os, socket, sys
spec, argv = json.loads(sys.argv[1]), sys.argv[2:]
keep, high = [], []
for kind in spec["fds"]:
    if kind == "closed":
        high.append(None)
        continue
    if kind == "tcp":
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    elif kind == "tcp-not-listening":
        s = socket.socket(); s.bind(("127.0.0.1", 0))
    elif kind == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
    elif kind == "netlink":
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    elif kind == "socketpair":
        s, peer = socket.socketpair(); keep.append(peer)
    elif kind == "file":
        s = open("/etc/passwd", "rb")
    elif kind == "pipe":
        r, w = os.pipe(); keep.append(w); s = os.fdopen(r, "rb")
    else:
        raise SystemExit("unknown fd kind " + kind)
    high.append(fcntl.fcntl(s.fileno(), fcntl.F_DUPFD_CLOEXEC, 100))
    s.close()
for i, fd in enumerate(high):
    if fd is None:
        try:
            os.close(3 + i)
        except OSError:
            pass
    else:
        os.dup2(fd, 3 + i, inheritable=True)
        os.close(fd)
env = dict(os.environ)
env.update(spec["env"])
if "LISTEN_PID" not in spec["env"]:
    env["LISTEN_PID"] = str(os.getpid())
os.execve(argv[0], argv, env)
"""


def activated(fds, env=None):
    """What a case inherits: fds (kinds, see LAUNCHER) and variables."""
    return {"fds": list(fds), "env": dict(env or {})}


def one(kind):
    return activated([kind], {"LISTEN_FDS": "1"})


# (id, options before "--", inherited (None: nothing), fragment of the one line)
CASES = [
    # options
    ("format-string-address", ["-l", "%s%n%x%p:0"], None, "--listen: '%s%n%x%p:0': invalid address"),
    ("escape-sequence-address", ["-l", "\x1b[31m:0"], None, "invalid address"),
    ("huge-port", ["-l", "1" * 100000], None, "port out of range 0-65535"),
    ("hex-port", ["-l", "0x50"], None, "invalid address"),
    ("port-overflow", ["-l", "18446744073709551617"], None, "port out of range 0-65535"),
    ("scope-overflow", ["-l", "[fe80::1%4294967296]:0"], None, "no such network interface"),
    ("scope-garbage", ["-l", "[fe80::1%" + "i" * 300 + "]:0"], None, "invalid address"),
    ("ipv6-two-ports", ["-l", "[::1]:0:0"], None, "invalid address"),
    ("ipv6-huge", ["-l", "[" + "f" * 1000 + "]:0"], None, "invalid address"),
    ("unix-relative", ["-l", "unix:relative/path"], None, "invalid address"),
    ("udp-empty", ["-l", "udp:"], None, "invalid address"),
    ("tcp-abstract", ["-l", "tcp:@name"], None, "invalid address"),
    ("abstract-too-long", ["-l", "@" + "a" * 108], None, "unix socket path too long"),
    ("path-too-long", ["-l", "/" + "p" * 108], None, "unix socket path too long"),
    ("udp-path-too-long", ["-l", "udp:/" + "p" * 200], None, "unix socket path too long"),
    ("backlog-exponent", ["--backlog=1e3"], None, "--backlog: '1e3'"),
    ("backlog-overflow", ["--backlog=99999999999999999999"], None, "--backlog: '99999999999999999999'"),
    ("mode-python-octal", ["--socket-mode=0o777"], None, "--socket-mode: '0o777'"),
    ("mode-unicode-digit", ["--socket-mode=\uff14\uff14\uff14"], None, "--socket-mode:"),
    ("port-fd-not-open", ["--port-fd=3"], None, "--port-fd: '3': not an open file descriptor"),
    ("port-fd-huge", ["--port-fd=99999999999"], None, "--port-fd: '99999999999'"),
    ("format-newline", ["--format=json\n"], None, "expected port, addr, url, json or env"),
    ("print-two-formats", ["--print=url,json"], None, "--print: 'url,json'"),
    ("ready-negative", ["--ready=-1s"], None, "--ready: '-1s'"),
    ("kill-after-compound", ["--kill-after=1d1h"], None, "--kill-after: '1d1h'"),
    ("success-status-big", ["--success-status=1000"], None, "--success-status: '1000'"),
    ("restart-limit-overflow", ["--restart-limit=99999999999999999999/1s"], None, "--restart-limit:"),
    ("max-connections-zero", ["--max-connections=0"], None, "--max-connections: '0'"),
    ("restart-with-exec", ["--restart=always", "--exec"], None, "cannot be combined with --exec"),
    ("setenv-empty", ["--setenv="], None, "missing variable name"),
    ("setenv-listen-pid", ["-E", "LISTEN_PID=1"], None, "this variable is set by prebind"),
    ("unknown-option-bytes", ["--\udcff\udcfe"], None, "unknown option"),
    ("port-file-name-too-long", ["--port-file=" + "n" * 300], None, "File name too long"),
    ("port-file-is-a-directory", ["--port-file=."], None, "it exists and is not a regular file"),
    # names
    ("name-del", ["-l", "n\x7f=0"], None, "invalid address"),
    ("name-non-ascii", ["-l", "n\u00e9=0"], None, "invalid address"),
    ("name-newline", ["-l", "a\nb=0"], None, "invalid address"),
    ("name-256", ["-l", "n" * 256 + "=0"], None, "invalid address"),
    ("name-then-address-with-equals", ["-l", "web=web=0"], None, "invalid address"),
    # templates
    ("template-index-overflow", ["-E", "X={99999999999999999999.port}"], None, "no socket of that name or index"),
    ("template-negative-index", ["-E", "X={-1.port}"], None, "no socket of that name or index"),
    ("template-empty-field", ["-E", "X={0.}"], None, "unknown field"),
    ("template-empty-ref", ["-E", "X={.port}"], None, "bad template"),
    ("template-trailing-braces", ["-E", "X={port}}}}"], None, "bad template"),
    ("template-unclosed-long", ["-E", "X={port" + LONG], None, "bad template"),
    ("template-format-string", ["-E", "X={%s%n.port}"], None, "no socket of that name or index"),
    ("template-nested", ["-E", "X={{port}"], None, "bad template"),
    ("subst-lone-brace", ["--subst"], None, "bad template"),  # COMMAND's arguments: see run_case()
    # environment: prebind socket-activated by a broken or hostile activator
    ("listen-fds-word", [], activated(["tcp"], {"LISTEN_FDS": "abc"}), "cannot take the sockets passed to prebind"),
    ("listen-fds-zero", [], activated(["tcp"], {"LISTEN_FDS": "0"}), "cannot take the sockets passed to prebind"),
    ("listen-fds-negative", [], activated(["tcp"], {"LISTEN_FDS": "-1"}), "cannot take the sockets passed"),
    ("listen-fds-overflow", [], activated(["tcp"], {"LISTEN_FDS": "99999999999"}), "cannot take the sockets"),
    ("listen-fds-too-many", [], activated(["tcp", "closed"], {"LISTEN_FDS": "2"}), "Bad file descriptor"),
    ("listen-fds-huge", [], activated(["tcp"], {"LISTEN_FDS": "2147483644"}), "Bad file descriptor"),
    ("inherited-file", [], one("file"), "Socket operation on non-socket"),
    ("inherited-file-after-a-socket", [], activated(["tcp", "file"], {"LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"}),
     "Socket operation on non-socket"),
    ("inherited-pipe", [], one("pipe"), "Socket operation on non-socket"),
    ("inherited-closed", [], one("closed"), "Bad file descriptor"),
    ("inherited-netlink", ["--print=env"], one("netlink"), "neither an IP nor a unix socket"),
    ("fdnames-too-long", ["--print=env"], activated(["tcp"], {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "a" * 2000}),
     "LISTEN_FDNAMES holds an invalid name"),
    ("fdnames-newline", [], activated(["tcp"], {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "a\nb"}),
     "LISTEN_FDNAMES holds an invalid name"),
    ("fdnames-empty", [], activated(["tcp"], {"LISTEN_FDS": "1", "LISTEN_FDNAMES": ""}),
     "LISTEN_FDNAMES holds an invalid name"),
    ("fdnames-empty-second", [], activated(["tcp", "tcp"], {"LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:"}),
     "LISTEN_FDNAMES holds an invalid name"),
    ("fdnames-non-ascii", [], activated(["tcp"], {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "\u00e9"}),
     "LISTEN_FDNAMES holds an invalid name"),
    ("fdnames-count", [], activated(["tcp"], {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "a:b"}),
     "cannot take the sockets passed to prebind"),
    ("accept-inherited-udp", ["--accept"], one("udp"), "--accept takes listening stream sockets only"),
    ("accept-inherited-not-listening", ["--accept"], one("tcp-not-listening"),
     "--accept takes listening stream sockets only"),
    ("accept-inherited-socketpair", ["--accept"], one("socketpair"), "--accept takes listening stream sockets only"),
    ("inetd-two-inherited", ["--inetd"], activated(["tcp", "tcp"], {"LISTEN_FDS": "2"}),
     "--inetd without --accept passes one socket"),
    # --port-fd naming one of the sockets prebind was passed: it would be
    # written into, closed, and still published and passed on
    ("port-fd-inherited-socket", ["--port-fd=3"], one("tcp"),
     "--port-fd=3: fd 3 is a socket passed to prebind (LISTEN_FDS, name 'unknown')"),
    ("port-fd-second-inherited-socket", ["--port-fd=4"],
     activated(["tcp", "udp"], {"LISTEN_FDS": "2", "LISTEN_FDNAMES": "web:dns"}),
     "--port-fd=4: fd 4 is a socket passed to prebind (LISTEN_FDS, name 'dns')"),
]


def run_case(args, inherited, work, marker, command_args=()):
    """prebind with a port file and a unix socket that a successful start
    would create (named before the bad input, so made first if at all)."""
    argv = [PREBIND, f"--port-file={work}/port", "-l", f"{work}/first.sock", *args, "--", "touch", str(marker),
            *command_args]
    if inherited is None:
        return subprocess.run(argv, cwd=work, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
    return subprocess.run([PYTHON, "-c", LAUNCHER, json.dumps(inherited), *argv], cwd=work, capture_output=True,
                          text=True, errors="replace", timeout=TIMEOUT)


def assert_clear_error(out, fragment, status=125):
    assert out.returncode == status, f"exit {out.returncode}, stderr: {out.stderr[:2000]!r}"
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr[:2000]
    assert lines[0].startswith("prebind: ") and fragment in lines[0], lines[0][:2000]
    assert out.stdout == ""


@pytest.mark.parametrize("args,inherited,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line_exit_125_and_leaves_nothing(tmp_path, args, inherited, fragment):
    work, marker = tmp_path / "work", tmp_path / "ran"
    work.mkdir()
    command_args = ["{"] if args == ["--subst"] else []
    out = run_case(args, inherited, work, marker, command_args)
    assert_clear_error(out, fragment)
    assert not marker.exists()
    assert os.listdir(work) == []


def test_the_table_is_big_enough():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("listen_pid", ["1", "abc", "", "99999999999999999999"])
def test_hostile_environment_that_is_not_for_prebind_is_dropped(listen_pid):
    """Variables of another activation or manager (LISTEN_PID of another
    process or garbage, a stale LISTEN_PIDFDID, a garbage NOTIFY_SOCKET)
    neither stop prebind nor reach COMMAND."""
    env = dict(os.environ, LISTEN_PID=listen_pid, LISTEN_FDS="7", LISTEN_FDNAMES="a\nb:" + "c" * 300,
               LISTEN_PIDFDID="12345", NOTIFY_SOCKET="@" + "\x01" * 200)
    out = subprocess.run([PREBIND, "-q", "--", "env", "-0"], env=env, capture_output=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert out.stderr == b""
    got = dict(e.split(b"=", 1) for e in out.stdout.split(b"\0") if b"=" in e)
    assert got[b"LISTEN_FDS"] == b"1" and got[b"LISTEN_FDNAMES"] == b"unknown"
    assert b"LISTEN_PIDFDID" not in got and b"NOTIFY_SOCKET" not in got
    assert int(got[b"LISTEN_PID"]) != 1


@pytest.mark.parametrize("listen_fds,listen_pid,count", [
    ("010", None, 8), ("0x0a", None, 10), ("0o10", None, 8), ("0b10", None, 2), ("+1", None, 1),
    (" 1", None, 1), ("2", "+{pid}", 2), ("2", " \t{pid}", 2), ("2", "0x{hexpid}", 2),
])
def test_listen_fds_numbers_follow_libsystemd_in_every_build(listen_fds, listen_pid, count):
    """LISTEN_FDS and LISTEN_PID as libsystemd 252 reads them (octal
    "010", hex, Python's 0o and 0b, a sign, blanks), whichever build runs:
    the dynamic one asks libsystemd, prebind-static its own parser, which
    read "010" as 10 and refused the rest."""
    env = {"LISTEN_FDS": listen_fds}
    if listen_pid:
        # The launcher execs prebind: its pid is the launcher's.
        env["LISTEN_PID"] = listen_pid
    spec = activated(["tcp"] * 10, env)
    launcher = LAUNCHER.replace('env.update(spec["env"])', 'env.update({k: v.format(pid=os.getpid(), '
                                'hexpid="%x" % os.getpid()) for k, v in spec["env"].items()})')
    out = subprocess.run([PYTHON, "-c", launcher, json.dumps(spec), PREBIND, "--print=port", "--", "true"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) == count, out.stdout


def test_longest_name_is_published_and_expanded_whole():
    """255 characters, as systemd allows: not cut short by a buffer."""
    name = "n" * 255
    out = run(["-q", "-l", f"{name}=0", "--print=env", "-E", "X={name}", "-E", f"Y={{{name}.url}}", "--", "sh", "-c",
               'printf "%s\\n%s\\n" "$X" "$Y"'])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"PREBIND_{name.upper()}_PORT=" in out.stdout
    assert lines[-2] == name
    assert lines[-1].startswith("http://127.0.0.1:")


# ---- notifications ----------------------------------------------------------

# COMMAND for --ready: waits for "go", sends the hostile datagrams of its
# case, then "STATUS=checkpoint" (so the test knows prebind has read them
# all: one socket, one queue), waits for "ready-now" and sends READY=1.
NOTIFIER = r"""
import array, os, random, socket, sys, time
case, work = sys.argv[1], sys.argv[2]
address = os.environ["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect("\0" + address[1:] if address.startswith("@") else address)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)

def wait_for(name):
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(work, name)):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.01)

def send(data, n_fds=0):
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(n_fds)]
    if fds:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        s.send(data)
    for fd in fds:
        os.close(fd)

def garbage(n):
    rng = random.Random(8)
    for _ in range(n):
        data = bytes(rng.choice(b"READY=1\n\0\r STATUS" + bytes(range(256))) for _ in range(rng.randrange(0, 4097)))
        send(b"\n".join(line for line in data.split(b"\n") if line != b"READY=1"))

wait_for("go")
if case == "oversized":
    send(b"READY=1\n" + b"x" * 4096)
elif case == "just-over-the-limit":
    send(b"READY=1\n".ljust(4097, b"\n"))
elif case == "huge":
    send(b"READY=1\n" * 8000)
elif case == "garbage":
    garbage(300)
elif case == "almost-ready":
    send(b"READY=0\nREADY=11\nREADY= 1\nready=1\nREADY=1\r\nXREADY=1\nREADY\n=1\n\n\n")
    send(b"READY=1\0")
    send(b"\0READY=1")
elif case == "empty":
    send(b"")
    send(b"\n" * 4096)
elif case == "bad-numbers":
    send(b"ERRNO=99999\nERRNO=-5\nERRNO=2x\nEXTEND_TIMEOUT_USEC=-1\nEXTEND_TIMEOUT_USEC=" + b"9" * 40)
elif case == "many-fds":
    send(b"READY=1", n_fds=250)
elif case == "some-fds":
    send(b"STATUS=with fds", n_fds=10)
elif case == "flood":
    for _ in range(3000):
        send(b"WATCHDOG=1\nMAINPID=1\nFDSTORE=1")
elif case != "nothing":
    sys.exit(4)
send(b"STATUS=checkpoint")
wait_for("ready-now")
send(b"READY=1")
time.sleep(120)
"""

NOTIFICATION_CASES = ["oversized", "just-over-the-limit", "huge", "garbage", "almost-ready", "empty",
                      "bad-numbers", "many-fds", "some-fds", "flood"]


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid):
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return targets


def pidfd_watched(pid):
    """Is a pidfd of pid's on one of its epoll fds (/proc/PID/fdinfo: "tfd: N")?"""
    pidfds, watched = set(), set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target == "anon_inode:[pidfd]" or target.startswith("pidfd:"):
                pidfds.add(int(fd))
            elif target == "anon_inode:[eventpoll]":
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    watched |= {int(line.split()[1]) for line in f if line.startswith("tfd:")}
        except (FileNotFoundError, ProcessLookupError):
            pass
    return bool(pidfds & watched)


def fds_settled(pid):
    """Are prebind's fds settled now that COMMAND runs? COMMAND's pidfd is
    on its epoll; or, where prebind has no pidfd at all (valgrind has no
    pidfd_open()), the gate and exec pipes are closed: no pipe left above
    stderr (valgrind's own fds sit above 1000). Only there: a COMMAND
    started directly has no pipes, and between its exec and prebind's
    pidfd_open() "no pipe" would count an fd too few (seen once in CI)."""
    if pidfd_watched(pid):
        return True
    if not WRAPPED:
        return False
    targets = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except (FileNotFoundError, ProcessLookupError):
            pass
    if any(t == "anon_inode:[pidfd]" or t.startswith("pidfd:") for t in targets.values()):
        return False
    return not any(t.startswith("pipe:") for fd, t in targets.items() if 2 < fd < 1000)


class NotifyJob:
    """prebind --ready with NOTIFIER as COMMAND; stderr to a file."""

    def __init__(self, start, tmp_path, case):
        self.work, self.pf, self.err = tmp_path / "work", tmp_path / "port", tmp_path / "stderr"
        self.work.mkdir()
        self.err_file = open(self.err, "w")
        self.p = start(["--ready=120s", f"--port-file={self.pf}", "--", PYTHON, "-c", NOTIFIER, case,
                        str(self.work)], stderr=self.err_file)
        self.child = command_child(self.p.pid, "NOTIFY_SOCKET")
        assert self.child, "COMMAND was not exec'd"
        self.address = environ_of(self.child)["NOTIFY_SOCKET"]
        # prebind watches COMMAND's pidfd once COMMAND runs (its gate and
        # exec pipes closed): its fds are settled from then on.
        assert wait_for(lambda: fds_settled(self.p.pid)), fd_targets(self.p.pid)
        self.fds_before = fd_count(self.p.pid)

    def stderr(self):
        return self.err.read_text(errors="replace")

    def go_and_check(self):
        (self.work / "go").touch()
        assert wait_for(lambda: "checkpoint" in self.stderr() or not pid_alive(self.p.pid)), self.stderr()[-2000:]
        assert pid_alive(self.p.pid), self.stderr()[-2000:]
        assert not self.pf.exists(), "published before READY=1"
        # Waited for, not looked at once: an fd open for a moment when the
        # line is seen is no leak (under valgrind the count includes
        # valgrind's own files, which it opens and closes as it needs);
        # a kept fd stays, and the wait runs out.
        assert wait_for(lambda: fd_count(self.p.pid) == self.fds_before), \
            f"prebind kept fds from a notification: {fd_targets(self.p.pid)}, {self.fds_before} before"
        (self.work / "ready-now").touch()
        assert wait_for(self.pf.exists), self.stderr()[-2000:]
        assert self.p.stop() == 128 + signal.SIGTERM
        assert not self.pf.exists()
        self.err_file.close()
        return self.stderr()


@pytest.mark.parametrize("case", NOTIFICATION_CASES)
def test_hostile_notifications_from_command_are_ignored(start, tmp_path, case):
    job = NotifyJob(start, tmp_path, case)
    err = job.go_and_check()
    assert "checkpoint" in err
    if case == "some-fds":
        assert "with fds" in err  # read, and its fds closed (fd count above)


def send_as(address, data, creds=None, n_fds=0):
    """A datagram to prebind's notify socket from this test (not COMMAND,
    nor its descendant), optionally with SCM_CREDENTIALS and fds."""
    ancillary = []
    if creds:
        ancillary.append((socket.SOL_SOCKET, socket.SCM_CREDENTIALS, array.array("i", creds)))
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(n_fds)]
    if fds:
        ancillary.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds)))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendmsg([data], ancillary, 0, "\0" + address[1:])
    finally:
        for fd in fds:
            os.close(fd)


def test_notifications_from_other_processes_are_ignored(start, tmp_path):
    job = NotifyJob(start, tmp_path, "nothing")
    # Root may claim another pid (CAP_SYS_ADMIN): the kernel lets it,
    # prebind checks it.
    try:
        send_as(job.address, b"READY=1", creds=(1, 0, 0))
        claimed = True
    except PermissionError:
        claimed = False
    send_as(job.address, b"READY=1")
    # With fds attached (more than prebind reads), or too long: dropped,
    # and the fds closed all the same.
    send_as(job.address, b"READY=1", n_fds=100)
    send_as(job.address, b"READY=1", n_fds=3)
    send_as(job.address, b"READY=1\n" + b"x" * 10000)
    err = job.go_and_check()
    assert "ignoring a notification from pid 1," in err or not claimed
    assert f"ignoring a notification from pid {os.getpid()}," in err


@pytest.fixture(scope="module")
def nobody():
    """Run prebind as nobody: prebind's path for that user, and the
    subprocess arguments that switch to it. The checkout may sit where
    nobody cannot reach (root's home is 0700), so nobody runs a copy of
    the binary in a directory of its own (public_prebind())."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to nobody")
    kwargs = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    prebind = public_prebind()
    probe = subprocess.run([prebind, "--version"], capture_output=True, timeout=TIMEOUT, **kwargs)
    assert probe.returncode == 0, f"nobody cannot run {prebind}: {probe.stderr!r}"
    return types.SimpleNamespace(prebind=prebind, kwargs=kwargs)


FORGER = r"""
import array, errno, os, socket, sys
address, claimed = sys.argv[1], int(sys.argv[2])
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
    try:
        s.sendmsg([b"READY=1"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS,
                                 array.array("i", [claimed, os.getuid(), os.getgid()]))], 0, "\0" + address[1:])
        print("sent")
    except PermissionError:
        print("EPERM")
    s.sendto(b"READY=1", "\0" + address[1:])
print(os.getpid())
"""


def test_credentials_of_command_cannot_be_claimed_by_another_user(start, tmp_path, nobody):
    job = NotifyJob(start, tmp_path, "nothing")
    out = subprocess.run([PYTHON, "-c", FORGER, job.address, str(job.child)], capture_output=True, text=True,
                         timeout=TIMEOUT, **nobody.kwargs)
    assert out.returncode == 0, out.stderr
    verdict, pid = out.stdout.split()
    assert verdict == "EPERM"  # the kernel refuses the claim
    err = job.go_and_check()   # and the plain READY=1 is not COMMAND's
    assert f"ignoring a notification from pid {pid}," in err


# ---- files and sockets: symlinks and permissions ---------------------------

@pytest.fixture
def public_dir():
    """A directory nobody can reach (pytest's tmp_path is root's, 0700)."""
    d = tempfile.mkdtemp(prefix="prebind-hostile-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_port_file_dangling_symlink_is_left_alone_and_target_not_created(tmp_path):
    link, target = tmp_path / "port", tmp_path / "victim"
    link.symlink_to(target)
    out = run([f"--port-file={link}", "--", "true"])
    assert_clear_error(out, "it exists and is not a regular file (left alone)")
    assert link.is_symlink() and not target.exists()
    assert sorted(os.listdir(tmp_path)) == ["port"]


def test_port_file_swapped_for_a_symlink_while_running_is_not_followed(tmp_path, start):
    pf, victim = tmp_path / "port", tmp_path / "victim"
    victim.write_text("keep")
    p = start([f"--port-file={pf}", "--", "sleep", str(TIMEOUT)])
    assert wait_for(pf.exists)
    tmp = tmp_path / "swap"
    tmp.symlink_to(victim)
    os.rename(tmp, pf)
    p.stop()
    assert pf.is_symlink() and victim.read_text() == "keep"
    assert sorted(os.listdir(tmp_path)) == ["port", "victim"]


def test_port_file_in_a_directory_nobody_may_write(public_dir, nobody):
    locked = os.path.join(public_dir, "locked")
    os.mkdir(locked, 0o755)
    out = subprocess.run([nobody.prebind, f"--port-file={locked}/port", "--", "true"], capture_output=True, text=True,
                         timeout=TIMEOUT, **nobody.kwargs)
    assert_clear_error(out, f"cannot write port file '{locked}/port': Permission denied")
    assert os.listdir(locked) == []


def test_port_file_of_another_user_in_a_sticky_directory(public_dir, nobody):
    sticky = os.path.join(public_dir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    theirs = os.path.join(sticky, "port")
    with open(theirs, "w") as f:
        f.write("root's\n")
    out = subprocess.run([nobody.prebind, f"--port-file={theirs}", "--", "true"], capture_output=True, text=True,
                         timeout=TIMEOUT, **nobody.kwargs)
    assert_clear_error(out, f"cannot write port file '{theirs}': Operation not permitted")
    assert open(theirs).read() == "root's\n"
    assert os.listdir(sticky) == ["port"]  # no temporary file left


@pytest.mark.parametrize("kind", ["symlink-to-live-socket", "dangling-symlink", "symlink-to-dir", "fifo",
                                  "regular-file", "directory"])
def test_unix_socket_path_that_is_not_our_socket_is_left_alone(tmp_path, kind):
    path, elsewhere = tmp_path / "s.sock", tmp_path / "elsewhere"
    live = None
    if kind == "symlink-to-live-socket":
        live = socket.socket(socket.AF_UNIX)
        live.bind(str(elsewhere))
        live.listen()
        path.symlink_to(elsewhere)
    elif kind == "dangling-symlink":
        path.symlink_to(elsewhere)
    elif kind == "symlink-to-dir":
        elsewhere.mkdir()
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "regular-file":
        path.write_text("keep")
    else:
        path.mkdir()
    before = sorted(os.listdir(tmp_path))
    try:
        out = run(["-l", str(path), "--", "true"])
    finally:
        if live:
            live.close()
    assert_clear_error(out, f"cannot listen on '{path}': the path exists and is not a socket (left alone)")
    assert sorted(os.listdir(tmp_path)) == before
    if kind == "dangling-symlink":
        assert not elsewhere.exists()
    if kind == "symlink-to-dir":
        assert os.listdir(elsewhere) == []


def test_live_socket_that_never_accepts_is_not_waited_for(tmp_path):
    """A listener with a full backlog makes a blocking connect() wait
    forever: the stale-socket probe must not hang."""
    path = tmp_path / "s.sock"
    hostile = socket.socket(socket.AF_UNIX)
    hostile.bind(str(path))
    hostile.listen(0)
    queued = []
    try:
        for _ in range(8):
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            try:
                c.connect(str(path))
            except BlockingIOError:
                c.close()
                break
            queued.append(c)
        t0 = time.monotonic()
        out = run(["-l", str(path), "--", "true"], timeout=TIMEOUT)
        assert time.monotonic() - t0 < TIMEOUT / 2
        assert_clear_error(out, f"cannot listen on '{path}': Address already in use")
        assert path.is_socket()
    finally:
        for c in queued:
            c.close()
        hostile.close()


def test_unix_socket_in_a_directory_nobody_may_write(public_dir, nobody):
    locked = os.path.join(public_dir, "locked")
    os.mkdir(locked, 0o755)
    out = subprocess.run([nobody.prebind, "-l", f"{locked}/s.sock", "--", "true"], capture_output=True, text=True,
                         timeout=TIMEOUT, **nobody.kwargs)
    assert_clear_error(out, f"cannot listen on '{locked}/s.sock': Permission denied")
    assert os.listdir(locked) == []


@pytest.mark.parametrize("mode,umask,nobody_connects", [(0o600, 0o000, False), (0o666, 0o077, True),
                                                        (0o660, 0o000, False)])
def test_socket_mode_is_honoured_whatever_the_umask(public_dir, nobody, start, mode, umask, nobody_connects):
    path = os.path.join(public_dir, "s.sock")
    p = start(["-q", f"--socket-mode={mode:o}", "-l", path, "--print", "--", "sleep", str(TIMEOUT)],
              preexec_fn=lambda: os.umask(umask))
    assert p.readline() == path
    assert stat.S_IMODE(os.lstat(path).st_mode) == mode
    attempt = subprocess.run([PYTHON, "-c", "import socket, sys\n"
                              "s = socket.socket(socket.AF_UNIX)\n"
                              "try:\n    s.connect(sys.argv[1]); print('connected')\n"
                              "except PermissionError:\n    print('refused')\n", path],
                             capture_output=True, text=True, timeout=TIMEOUT, **nobody.kwargs)
    assert attempt.stdout.strip() == ("connected" if nobody_connects else "refused"), attempt.stderr
    p.stop()
    assert not os.path.exists(path)


def test_socket_file_replaced_by_a_regular_file_is_not_removed(tmp_path, start):
    path = tmp_path / "s.sock"
    p = start(["-q", "-l", str(path), "--print", "--", "sleep", str(TIMEOUT)])
    assert p.readline() == str(path)
    (tmp_path / "new").write_text("theirs")
    os.rename(tmp_path / "new", path)
    p.stop()
    assert path.read_text() == "theirs"


# ---- resource limits --------------------------------------------------------

def with_fd_limit(n):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


FD_MODES = {
    "supervised": ["-l", "0", "-l", "udp:0", "-l", "{work}/s.sock"],
    "ready": ["--ready=5s", "-l", "0", "-l", "0"],
    "exec": ["--exec", "-l", "0", "-l", "udp:0", "-l", "@prebind-hostile-{pid}"],
    "inetd": ["--inetd", "-l", "0"],
}


@pytest.mark.skipif(WRAPPED, reason="a wrapper (valgrind) uses fds of its own")
@pytest.mark.parametrize("mode", sorted(FD_MODES))
def test_fd_exhaustion_is_a_one_line_error_and_exit_125(tmp_path, mode):
    """ulimit -n from 4 (the dynamic loader needs one) up: COMMAND runs
    (exit 7), or prebind says it ran out of fds, in one line, exit 125,
    leaving nothing."""
    work = tmp_path / "work"
    work.mkdir()
    outcomes = {}
    for n in range(4, 24):
        args = [a.format(work=work, pid=os.getpid()) for a in FD_MODES[mode]]
        out = subprocess.run([PREBIND, f"--port-file={work}/port", *args, "--", "sh", "-c", "exit 7"],
                             capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=with_fd_limit(n))
        outcomes[n] = out.returncode
        if out.returncode == 125:
            lines = out.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("prebind: ") and "Too many open files" in lines[0], \
                f"ulimit -n {n}: {out.stderr!r}"
        else:
            assert out.returncode == 7, f"ulimit -n {n}: exit {out.returncode}, {out.stderr!r}"
            if mode != "ready":
                assert out.stderr == "", f"ulimit -n {n}: {out.stderr!r}"
            if mode == "exec":  # COMMAND replaced prebind: nobody is left to clean up (by design)
                os.unlink(work / "port")
        assert os.listdir(work) == [], f"ulimit -n {n} left {os.listdir(work)}"
    assert outcomes[4] == 125 and outcomes[23] == 7, outcomes


@pytest.mark.skipif(WRAPPED, reason="a wrapper (valgrind) uses fds of its own")
def test_fd_exhaustion_in_accept_mode_backs_off_and_keeps_serving(tmp_path):
    """At ulimit -n 7, prebind talks to its guard (fd 3), listens (fd 4),
    reads signals (fd 5) and waits on its event loop (epoll, fd 6), but accept() has no fd left for
    the connection: EMFILE. It neither spins nor stops the service (issue
    21: one accept(2) policy with the forwarder): the connection waits in
    the backlog, the failure is said once, and once fds are free again
    (here: the limit raised from outside) the client is served."""
    if not shutil.which("prlimit"):
        pytest.skip("needs prlimit (util-linux)")
    # stderr is a pipe read only at the end: a prebind that logs in a loop
    # blocks once it is full, instead of filling a disk.
    p = subprocess.Popen([PREBIND, "-q", "--print", "--accept", "--inetd", "--", "sh", "-c", "echo served"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (7, 64)))
    try:
        port = int(p.stdout.readline())
        client = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)  # queued in the backlog
        cpu_before, t0 = cpu_seconds(p.pid), time.monotonic()
        # Spinning shows only over time: a second of it, measured.
        assert_nothing_within(1.0, "prebind stopped serving", lambda: p.poll() is not None)
        spent = cpu_seconds(p.pid) - cpu_before
        assert spent < 0.5 * (time.monotonic() - t0), f"prebind spun: {spent:.2f} s of CPU in 1 s"
        subprocess.run(["prlimit", f"--pid={p.pid}", "--nofile=64"], check=True, timeout=TIMEOUT)
        assert client.recv(64) == b"served\n"
        client.close()
        p.send_signal(signal.SIGTERM)
        status = p.wait(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        err = os.read(p.stderr.fileno(), 1 << 16).decode(errors="replace")
        p.stdout.close()
        p.stderr.close()
    lines = err.splitlines()
    assert status == 0, f"exit {status}; stderr ({len(lines)} lines): {lines[:3]}"
    assert "--accept: cannot accept: Too many open files" in lines[0], lines[:3]
    assert len(lines) <= 2, lines[:5]


def in_netns(script):
    """Run sh -c script in a private network namespace (loopback up)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("needs root, unshare and ip")
    return subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && " + script], capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("first,second", [("0", "0"), ("udp:0", "udp:0"), ("[::1]:0", "[::1]:0")])
def test_port_range_exhausted_is_a_clear_error(tmp_path, first, second):
    out = in_netns("echo '40000 40000' > /proc/sys/net/ipv4/ip_local_port_range && exec " + shlex.join(
        [PREBIND, f"--port-file={tmp_path}/port", "-l", f"{tmp_path}/s.sock", "-l", first, "-l", second, "--",
         "touch", f"{tmp_path}/ran"]))
    assert_clear_error(out, f"cannot listen on '{second}': no free port left in the local port range")
    assert os.listdir(tmp_path) == []


def test_sun_path_limits(tmp_path):
    """108 bytes of sun_path: a path of 107 characters and its NUL fit, an
    abstract name of 107 after the NUL too; one more is a clear error."""
    base = f"{tmp_path}/"
    fits = base + "p" * (107 - len(base))
    assert len(fits) == 107
    out = run(["-q", "--print", "-l", fits, "-l", "@" + "a" * 107, "--", "true"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [fits, "@" + "a" * 107]
    assert os.listdir(tmp_path) == []
    for address in (fits + "p", "@" + "a" * 108, "unix:" + fits + "p", "udp:@" + "a" * 108):
        out = run([f"--port-file={tmp_path}/port", "-l", address, "--", "true"])
        assert_clear_error(out, f"--listen: '{address}': unix socket path too long")
    assert os.listdir(tmp_path) == []

"""Another local user against the --intercept broker and the notify socket
(issue 19): a pid is only a number, and the kernel hands it to the next
process once its owner is reaped. prebind must honour a socket claim or a
READY=1 from the process that is alive and made the connection (or sent
the message), not from whatever process has its number now.

The attacks run as nobody in a PID namespace of their own (`unshare
--pid --fork --mount-proc`, as root), where pid_max is small enough for
nobody to wrap the pid counter by forking in a fraction of a second (on
a host, 32,768 forks take about 9 s). Nothing else forks there, so the
attacker can steer the counter: the process it wants lands on the number
it wants. Each test failed against the prebind before issue 19."""

import errno
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, need_unshare, run, wait_for

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a PID namespace, and nobody to attack it")

# The attacker's tools, shared by every scenario: fork until the kernel's
# next pid is the one wanted.
STEER = r"""
import json, os, socket, struct, sys, time

def fork_and_reap():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid

def group_and_session_ids():
    # A number stays in use while a process group or a session has it,
    # after its leader is gone: prebind's guard (src/guard/guard.c) is in
    # the session its short-lived intermediate made, whose number no
    # process in /proc has, and the kernel hands out to no one.
    ids = set()
    for d in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{d}/stat").read() if d.isdigit() else ""
        except OSError:
            continue
        if stat:
            ids.update(int(f) for f in stat[stat.rindex(")") + 2:].split()[2:4])
    return ids

def taken(q, ids):
    return os.path.exists(f"/proc/{q}") or q in ids

def steer(target):
    # The next fork gets target when the last pid handed out is below it
    # and every number in between is taken (pids are handed out in turn,
    # skipping those in use -- by a process, a process group or a
    # session -- and wrap at pid_max).
    for n in range(20000):
        last = fork_and_reap()
        if last < target:
            ids = group_and_session_ids()
            if all(taken(q, ids) for q in range(last + 1, target)):
                return n + 1
    raise SystemExit(f"could not steer the pid counter to {target}")

def claim(conn, port):
    # struct intercept_request (src/intercept/protocol.h): version 1, CLAIM.
    conn.settimeout(10)
    try:
        conn.send(struct.pack("=IIiiI112s", 1, 1, socket.AF_INET, socket.SOCK_STREAM, port, b"0.0.0.0"))
        data, fds, _, _ = socket.recv_fds(conn, 64, 4)
    except OSError as e:
        return {"outcome": type(e).__name__, "fds": 0}
    for fd in fds:
        os.close(fd)
    if len(data) != 8:
        return {"outcome": "closed", "fds": len(fds)}
    return {"outcome": "error %d" % struct.unpack("=iI", data)[0], "fds": len(fds)}

def landed(port):
    # COMMAND's server forks a worker per connection; the worker says its pid.
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    return client, int(client.makefile().readline())
"""

# The connection is made by a process that exits at once (its fd passed to
# the attacker); its number then goes to a worker of COMMAND, and the
# attacker claims on the connection.
ATTACK_CLAIM = STEER + r"""
broker, port, wanted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mine, theirs = socket.socketpair()
connector = os.fork()
if connector == 0:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0" + broker[1:])
    socket.send_fds(theirs, [b"x"], [s.fileno()])
    os._exit(0)
_, fds, _, _ = socket.recv_fds(mine, 1, 1)
os.waitpid(connector, 0)
conn = socket.socket(fileno=fds[0])
started = time.monotonic()
forks = steer(connector)
client, worker = landed(port)
result = claim(conn, wanted)
result.update(connector=connector, worker=worker, forks=forks, seconds=time.monotonic() - started)
print(json.dumps(result))
"""

# COMMAND has exited and waits for its --restart: the attacker lands a
# process of its own on COMMAND's number, which claims.
ATTACK_RESTART = STEER + r"""
broker, command, wanted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
forks = steer(command)
r, w = os.pipe()
claimant = os.fork()
if claimant == 0:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0" + broker[1:])
    result = claim(s, wanted)
    result.update(claimant=os.getpid())
    os.write(w, json.dumps(result).encode())
    os._exit(0)
os.close(w)
os.waitpid(claimant, 0)
result = json.loads(os.read(r, 4096))
result.update(forks=forks)
print(json.dumps(result))
"""

# READY=1 from a process that exits at once, read by prebind later (it is
# stopped meanwhile: a loop that is busy); by then a worker of COMMAND has
# the sender's number.
ATTACK_NOTIFY = STEER + r"""
address, port = sys.argv[1], int(sys.argv[2])
sender = os.fork()
if sender == 0:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"READY=1", "\0" + address[1:])
    os._exit(0)
os.waitpid(sender, 0)
forks = steer(sender)
client, worker = landed(port)
print(json.dumps({"sender": sender, "worker": worker, "forks": forks}), flush=True)
sys.stdin.read()  # the worker lives until prebind has read the message
"""

# COMMAND: binds 8000 itself (--intercept), or takes LISTEN_FDS (--ready),
# and forks a worker per connection, which says its pid and waits.
SERVER = r"""
import os, signal, socket, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
work, mode = sys.argv[1:3]
if mode == "notify":
    s = socket.socket(fileno=3)
    with open(os.path.join(work, "port.new"), "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(os.path.join(work, "port.new"), os.path.join(work, "port"))
    def ready():
        while not os.path.exists(os.path.join(work, "ready-now")):
            time.sleep(0.01)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as n:
            n.sendto(b"READY=1", "\0" + os.environ["NOTIFY_SOCKET"][1:])
    import threading
    threading.Thread(target=ready, daemon=True).start()
else:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 8000))
    s.listen()
while True:
    c, _ = s.accept()
    if os.fork() == 0:
        s.close()
        c.sendall(b"%d\n" % os.getpid())
        c.settimeout(30)
        try:
            c.recv(1)
        except OSError:
            pass
        os._exit(0)
    c.close()
"""

# PID 1 of the namespace: sets it up, runs prebind and the attacker as
# nobody, and prints what happened as one JSON line.
INNER = r"""
import json, os, select, signal, socket, subprocess, sys, time
scenario, prebind, python, work = sys.argv[1:5]
attack, server = sys.argv[5], sys.argv[6]
NOBODY = dict(user=65534, group=65534, extra_groups=[])

def wait_for(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True

def environ_of(pid):
    try:
        return dict(e.split("=", 1) for e in open(f"/proc/{pid}/environ").read().split("\0") if "=" in e)
    except OSError:
        return {}

def command_of(prebind_pid, name):
    # COMMAND, once it has exec'd: the child of prebind's with name in its
    # environment (prebind's first child may also be the guard's
    # short-lived intermediate, or COMMAND's fork waiting at its gate,
    # before its exec). 0 if there is none.
    try:
        children = open(f"/proc/{prebind_pid}/task/{prebind_pid}/children").read().split()
    except OSError:
        return 0
    for child in children:
        if name in environ_of(child):
            return int(child)
    return 0

def attacker(*args):
    out = subprocess.run([python, "-c", attack, *args], capture_output=True, text=True, timeout=60, **NOBODY)
    if out.returncode != 0:
        raise SystemExit("attacker failed: " + out.stderr[-2000:])
    return json.loads(out.stdout)

def attacker_holding(*args):
    # The attacker, until its stdin is closed: (process, what it printed).
    a = subprocess.Popen([python, "-c", attack, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, **NOBODY)
    ready = select.select([a.stdout], [], [], 60)[0]
    line = a.stdout.readline() if ready else ""
    if not line:
        a.kill()
        raise SystemExit("attacker failed: " + a.communicate(timeout=10)[1][-2000:])
    return a, json.loads(line)

def answers(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        return int(c.makefile().readline())

# A pid space nobody wraps in a moment: 60 pids, from 300 (the kernel
# keeps the lower ones back after a wrap) to 359.
with open("/proc/sys/kernel/pid_max", "w") as f:
    f.write("360")
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write("300")

result = {}
err = open(os.path.join(work, "stderr"), "w")
port_file = os.path.join(work, "published")
if scenario == "notify":
    args = ["--ready=20s", f"--port-file={port_file}"]
else:
    args = ["--intercept-via=preload", "--intercept=8000", f"--port-file={port_file}"]
if scenario == "restart":
    args += ["--restart=always", "--restart-delay=5s", "--restart-limit=0"]
p = subprocess.Popen([prebind, *args, "--", python, "-c", server, work, scenario], stdout=subprocess.DEVNULL,
                     stderr=err)
try:
    if scenario == "claim":
        assert wait_for(lambda: os.path.exists(port_file)), "not published"
        port = int(open(port_file).read().split()[0])
        assert wait_for(lambda: command_of(p.pid, "PREBIND_BROKER")), "COMMAND did not start"
        broker = environ_of(command_of(p.pid, "PREBIND_BROKER"))["PREBIND_BROKER"]
        result = attacker(broker, str(port), "8000")
        result["served_by"] = answers(port)
        result["command"] = command_of(p.pid, "PREBIND_BROKER")
    elif scenario == "restart":
        assert wait_for(lambda: os.path.exists(port_file)), "not published"
        port = int(open(port_file).read().split()[0])
        assert wait_for(lambda: command_of(p.pid, "PREBIND_BROKER")), "COMMAND did not start"
        command = command_of(p.pid, "PREBIND_BROKER")
        broker = environ_of(command)["PREBIND_BROKER"]
        os.kill(command, signal.SIGKILL)
        # Reaped by prebind: its number is free.
        assert wait_for(lambda: not os.path.exists(f"/proc/{command}")), "COMMAND was not reaped"
        result = attacker(broker, str(command), "8000")
        result["command"] = command
        # The next COMMAND claims the socket and serves.
        assert wait_for(lambda: command_of(p.pid, "PREBIND_BROKER") not in (0, command)), "not restarted"
        result["served_by"] = answers(port)
        result["new_command"] = command_of(p.pid, "PREBIND_BROKER")
    elif scenario == "notify":
        command = 0
        assert wait_for(lambda: command_of(p.pid, "NOTIFY_SOCKET")), "COMMAND did not start"
        command = command_of(p.pid, "NOTIFY_SOCKET")
        assert wait_for(lambda: os.path.exists(os.path.join(work, "port"))), "COMMAND did not say its port"
        port = int(open(os.path.join(work, "port")).read())
        # Stopped, prebind reads the message late, as a busy loop would.
        os.kill(p.pid, signal.SIGSTOP)
        try:
            a, result = attacker_holding(environ_of(command)["NOTIFY_SOCKET"], str(port))
        finally:
            os.kill(p.pid, signal.SIGCONT)
        marker = f"ignoring a notification from pid {result['sender']},"
        wait_for(lambda: os.path.exists(port_file) or marker in open(os.path.join(work, "stderr")).read(), 10)
        result["published_early"] = os.path.exists(port_file)
        a.stdin.close()
        a.wait(timeout=10)
        open(os.path.join(work, "ready-now"), "w").close()
        result["published"] = wait_for(lambda: os.path.exists(port_file))
finally:
    p.send_signal(signal.SIGTERM)
    try:
        result["status"] = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        result["status"] = p.wait()
err.close()
result["stderr"] = open(os.path.join(work, "stderr")).read()[-4000:]
print(json.dumps(result))
"""


def in_pid_namespace(tmp_path, scenario, attack):
    """Run the scenario as PID 1 of a new PID namespace; its JSON result."""
    need_unshare("--pid", "--fork", "--kill-child", "--mount-proc")
    work = tmp_path / "work"
    work.mkdir()
    try:
        out = subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", PYTHON, "-c", INNER,
                              scenario, PREBIND, PYTHON, str(work), attack, SERVER],
                             capture_output=True, text=True, timeout=120)
    except (FileNotFoundError, ProcessLookupError):
        pytest.skip("no unshare(1)")
    if "unshare failed" in out.stderr or "cannot open /proc/sys/kernel/pid_max" in out.stderr:
        pytest.skip(f"no PID namespace here: {out.stderr.strip()}")
    assert out.returncode == 0 and out.stdout.strip(), out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_claim_from_a_connection_whose_process_is_gone_is_refused(tmp_path):
    # The attacker connects from a process that exits at once, keeps the
    # connection, and wraps the pid counter until a worker of COMMAND has
    # the connector's number: SO_PEERCRED's pid is then COMMAND's
    # descendant. The claim must be refused, and the server keep its
    # socket.
    r = in_pid_namespace(tmp_path, "claim", ATTACK_CLAIM)
    assert r["worker"] == r["connector"], r  # the attack's own precondition: the number was reused
    assert r["outcome"] == f"error {errno.EPERM}" and r["fds"] == 0, r  # EPERM, no socket
    assert f"refused port 8000 to pid {r['connector']}, which had exited since it connected" in r["stderr"], r
    assert r["served_by"] != r["connector"]  # the server still answers on the published port
    assert r["status"] == 128 + signal.SIGTERM, r["stderr"]


def test_claim_after_restart_from_the_old_commands_pid_is_refused(tmp_path):
    # --restart: between COMMAND's exit and the next start, the old
    # COMMAND's number must not stand for COMMAND any more.
    r = in_pid_namespace(tmp_path, "restart", ATTACK_RESTART)
    assert r["claimant"] == r["command"], r  # the precondition: the attacker has COMMAND's old number
    assert r["outcome"] == f"error {errno.EPERM}" and r["fds"] == 0, r
    assert f"refused port 8000 to pid {r['command']}, which came after COMMAND exited" in r["stderr"], r
    assert r["served_by"] not in (r["command"], 0) and r["new_command"] != r["command"], r
    assert r["status"] == 128 + signal.SIGTERM, r["stderr"]


def test_ready_from_a_sender_whose_pid_was_reused_is_ignored(tmp_path):
    # READY=1 from another user's process that exited before prebind read
    # it; a worker of COMMAND has its number by then.
    r = in_pid_namespace(tmp_path, "notify", ATTACK_NOTIFY)
    assert r["worker"] == r["sender"], r
    assert not r["published_early"], r["stderr"]
    assert f"ignoring a notification from pid {r['sender']}," in r["stderr"], r["stderr"]
    assert r["published"], r["stderr"]  # COMMAND's own READY=1 still counts
    assert r["status"] == 128 + signal.SIGTERM, r["stderr"]


def test_connection_that_never_speaks_is_closed(start, tmp_path):
    # A connection that sends no request is closed within 2 s: nobody can
    # keep one open for a claim later, once its process is gone.
    port_file = tmp_path / "port"
    p = start([f"--port-file={port_file}", "--intercept-via=preload", "--intercept=8000", "--", PYTHON, "-c", SERVER,
               str(tmp_path), "bind"])
    assert wait_for(port_file.exists), p.stderr_text()
    command = int(open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()[0])
    broker = dict(e.split("=", 1) for e in open(f"/proc/{command}/environ").read().split("\0")
                  if "=" in e)["PREBIND_BROKER"]
    silent = []
    for _ in range(3):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect("\0" + broker[1:])
        s.settimeout(10)
        silent.append(s)
    started = time.monotonic()
    for s in silent:
        assert s.recv(64) == b""  # closed, no answer (a timeout raises)
        s.close()
    assert time.monotonic() - started < 4
    # The server still serves.
    with socket.create_connection(("127.0.0.1", int(port_file.read_text().split()[0])), timeout=TIMEOUT) as c:
        assert int(c.makefile().readline()) > 0
    assert p.stop() == 128 + signal.SIGTERM


# prebind in a PID namespace of its own whose /proc is still the host's
# (`unshare --pid --fork` without --mount-proc, a common way to make sure
# nothing outlives a CI step). The sender checks read the peer's number
# from its pidfd's fdinfo and walk /proc/PID/stat, both in the numbers of
# /proc's namespace, and compare them with COMMAND's pid from fork(), in
# prebind's own: COMMAND itself never matches. Before the pidfd checks
# (53de53b) both cases below worked.
OWN_READY = r"""
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", "\0" + os.environ["NOTIFY_SOCKET"][1:])
time.sleep(1)
"""

# The server prints the port it got in one write(2): prebind publishes
# once the bind is answered, so both write to stdout at about the same
# time (print() may write the number and its newline apart, as with
# PYTHONUNBUFFERED).
OWN_BIND = r"""
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8000))
s.listen()
os.write(1, b"%d\n" % s.getsockname()[1])
time.sleep(0.5)
"""


def in_pid_namespace_with_host_proc(*args):
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--kill-child", PREBIND, *args], capture_output=True,
                              text=True, timeout=TIMEOUT)
    except (FileNotFoundError, ProcessLookupError):
        pytest.skip("no unshare(1)")


@pytest.mark.skipif(bool(os.environ.get("PREBIND_WRAPPER")),
                    reason="valgrind 3.19 has no pidfd_open(): the by-number fallback cannot translate pids")
def test_ready_from_command_is_heard_when_proc_is_another_pid_namespaces():
    # Reproduction: unshare -pf prebind --ready=5s --print -- python3 -c
    # '<send READY=1 to $NOTIFY_SOCKET>; sleep 1' printed nothing and said
    # "ignoring a notification from pid 2, which is not 'python3' (pid 2)".
    r = in_pid_namespace_with_host_proc("--ready=5s", "--print", "--", PYTHON, "-c", OWN_READY)
    if "unshare failed" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert "ignoring a notification" not in r.stderr, r.stderr
    assert r.returncode == 0 and r.stdout.strip().isdigit(), (r.returncode, r.stdout, r.stderr)


@pytest.mark.skipif(bool(os.environ.get("PREBIND_WRAPPER")),
                    reason="valgrind 3.19 has no pidfd_open(): the by-number fallback cannot translate pids")
def test_claim_from_command_is_honoured_when_proc_is_another_pid_namespaces():
    # Reproduction: unshare -pf prebind --intercept=8000 --print -- (a
    # server binding 127.0.0.1:8000): "refused port 8000 to pid 2, which
    # does not descend from COMMAND", and the server bound the real 8000.
    r = in_pid_namespace_with_host_proc("--intercept=8000", "--print", "--ready-timeout=5s", "--", PYTHON, "-c",
                                        OWN_BIND)
    if "unshare failed" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert "refused port 8000" not in r.stderr, r.stderr
    lines = r.stdout.split()
    assert r.returncode == 0 and len(lines) == 2 and lines[0] == lines[1] != "8000", (r.stdout, r.stderr)

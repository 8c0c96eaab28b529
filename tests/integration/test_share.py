"""--share=NAME (issue 23): one server for every caller with the same name,
started once, gone after the last holder however it went. Real servers
(redis-server, the stdlib HTTP server), real parallel runs (pytest -n 8).

Each test gets its own XDG_RUNTIME_DIR, a short 0700 directory, so the
names live in XDG_RUNTIME_DIR/prebind and "nothing is left" is checked
there."""

import os
import pathlib
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, assert_nothing_within, children, cpu_seconds, pid_alive, public_prebind, server, \
    wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_SRC = os.path.join(HERE, "..", "..", "python", "src")
NOBODY = 65534
# The default --share-linger.
LINGER = 1.0
# What a loaded machine may add to the linger before everything is gone
# (the server's own exit included): the bound separates "stopped after
# the linger" from "never stopped", not a speed.
SLACK = 10.0


@pytest.fixture
def runtime(tmp_path):
    """An XDG_RUNTIME_DIR of this test's own (short: the unix socket path
    must fit in sun_path), and the environment that names it."""
    directory = tempfile.mkdtemp(prefix="pbs-")
    env = dict(os.environ, XDG_RUNTIME_DIR=directory, PIDS=str(tmp_path / "pids"))
    yield env
    # A test that failed half-way leaves no server behind.
    for entry in leftovers(env):
        if entry.endswith(".sock"):
            subprocess.run([PREBIND, f"--share={entry[:-5]}", "--stop"], env=env, capture_output=True,
                           timeout=TIMEOUT)
    # One that could not be told (a server out of fds, a failed check of
    # a broken build): whatever runs with this directory is killed.
    mark = f"XDG_RUNTIME_DIR={directory}".encode()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    shutil.rmtree(directory, ignore_errors=True)


def share_dir(env):
    return os.path.join(env["XDG_RUNTIME_DIR"], "prebind")


def leftovers(env):
    """What is left of every share: files in the share directory."""
    d = share_dir(env)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def pids(env):
    try:
        with open(env["PIDS"]) as f:
            return [int(line) for line in f.read().split()]
    except FileNotFoundError:
        return []


def refused(port):
    """Nothing listens on 127.0.0.1:port any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


# An HTTP server that writes its pid to $PIDS and takes its socket from fd 3.
HTTP = ["sh", "-c", f'echo $$ >> "$PIDS"; exec {PYTHON} {server("stdlib_http.py")}']


def holder(args, env, **kwargs):
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen([PREBIND, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def first_line(proc, timeout=TIMEOUT):
    """The first line a holder printed (bounded)."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), f"{proc.args} printed nothing within {timeout}s"
    return proc.stdout.readline().strip()


def status(env, name):
    return subprocess.run([PREBIND, f"--share={name}", "--status"], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


def gone(env, pid_list, port=None, bound=LINGER + SLACK):
    """After --share-linger (and SLACK): no process, no listener, no file."""
    deadline = time.monotonic() + bound
    wait_for(lambda: not any(pid_alive(p) for p in pid_list) and not leftovers(env), timeout=bound)
    assert time.monotonic() <= deadline + 0.2
    assert [p for p in pid_list if pid_alive(p)] == []
    assert leftovers(env) == []
    if port is not None:
        assert refused(port)


def supervisor_pid(env, name):
    out = status(env, name)
    assert out.returncode == 0, out
    return int(out.stdout.split("supervisor pid ")[1].split(",")[0])


# --------------------------------------------------------------- xdist

INNER_TESTS = textwrap.dedent('''
    import os, socket, time
    import pytest

    REDIS = ["sh", "-c", 'echo $$ >> "$PIDS"; exec redis-server --port 6379 --save "" --appendonly no']

    @pytest.fixture
    def redis(prebind):
        return prebind(REDIS, share="redis", intercept=6379, ready_log="Ready to accept")

    @pytest.mark.parametrize("i", range(80))
    def test_redis(redis, i):
        with socket.create_connection((redis.host, redis.port), timeout=10) as s:
            s.sendall(b"INCR hits\\r\\n")
            reply = s.makefile("rb").readline()
        assert reply.startswith(b":"), reply
        with open(os.environ["PORTS"], "a") as f:
            f.write(f"{redis.port} {int(reply[1:])}\\n")
        time.sleep(float(os.environ.get("NAP", "0.02")))  # the test's own run: its workload, not a wait
''')


def inner_run(tmp_path, env, workers, **kwargs):
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_many.py").write_text(INNER_TESTS)
    env = dict(env, PYTHONPATH=os.path.abspath(PLUGIN_SRC), PORTS=str(tmp_path / "ports"))
    env.update(kwargs.pop("extra_env", {}))
    args = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_prebind.plugin", "-n",
            str(workers), str(tmp_path / "inner")]
    return args, env


def test_eighty_tests_on_eight_workers_share_one_redis(tmp_path, runtime):
    pytest.importorskip("xdist")
    if not shutil.which("redis-server"):
        pytest.skip("needs redis-server")
    args, env = inner_run(tmp_path, runtime, 8)
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "80 passed" in out.stdout
    started = pids(runtime)
    assert len(started) == 1, started
    lines = [line.split() for line in (tmp_path / "ports").read_text().splitlines()]
    assert len(lines) == 80
    assert len({port for port, _ in lines}) == 1
    # One counter: every INCR of the 80 reached the same redis.
    assert sorted(int(n) for _, n in lines) == list(range(1, 81))
    gone(runtime, started, int(lines[0][0]))


def test_kill_9_of_the_whole_test_run_leaves_nothing(tmp_path, runtime):
    pytest.importorskip("xdist")
    if not shutil.which("redis-server"):
        pytest.skip("needs redis-server")
    args, env = inner_run(tmp_path, runtime, 4, extra_env={"NAP": "30"})
    run = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        assert wait_for(lambda: (tmp_path / "ports").exists() and
                        len((tmp_path / "ports").read_text().splitlines()) >= 4, timeout=60)
        port = int((tmp_path / "ports").read_text().split()[0])
        supervisor = supervisor_pid(runtime, "redis")
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=TIMEOUT)
    # Every holder was in the run's tree: all killed at once.
    gone(runtime, [*pids(runtime), supervisor], port)
    assert len(pids(runtime)) == 1


TRIALS = 50
# Ready (--ready-log=^ready$) once its pid is written.
SLEEPER = ["--ready-log=^ready$", "--", "sh", "-c", 'echo $$ >> "$PIDS"; echo ready; exec sleep 100']


def test_kill_9_of_a_holder_leaves_no_port_file(tmp_path, runtime):
    """Counted over 50 runs: a holder's guard removes its port file."""
    keeper = holder(["--share=web", "--print", *SLEEPER], runtime)
    left = []
    try:
        first_line(keeper)
        for i in range(TRIALS):
            port_file = tmp_path / f"port-{i}"
            h = holder(["--share=web", f"--port-file={port_file}", *SLEEPER], runtime)
            assert wait_for(port_file.exists), h.stderr.read()
            h.kill()
            h.wait(timeout=TIMEOUT)
            if not wait_for(lambda: not port_file.exists(), timeout=5):
                left.append(port_file.name)
    finally:
        keeper.terminate()
        keeper.wait(timeout=TIMEOUT)
    assert left == [], f"{len(left)} of {TRIALS} port files left"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("port-")] == []


def test_kill_9_of_the_supervisor_leaves_nothing(runtime):
    """Counted over 50 runs: the supervisor's guard stops COMMAND and
    removes NAME.sock, NAME.log and NAME.lock, not the next caller."""
    left = []
    for i in range(TRIALS):
        h = holder(["--share=web", "--print", *SLEEPER], runtime)
        first_line(h)
        supervisor = supervisor_pid(runtime, "web")
        os.kill(supervisor, signal.SIGKILL)
        assert h.wait(timeout=TIMEOUT) == 125
        if not wait_for(lambda: not leftovers(runtime), timeout=5):
            left.append(leftovers(runtime))
    assert left == [], f"files left in {len(left)} of {TRIALS} runs: {left[:3]}"
    assert wait_for(lambda: not any(pid_alive(p) for p in pids(runtime)))
    assert len(pids(runtime)) == TRIALS


# --------------------------------------------------------------- callers

def test_sixteen_callers_at_the_same_instant_start_one_server(tmp_path, runtime):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    # Each waits at the gate (its cat reads the FIFO until it has no
    # writer left), then all go at once. The test holds the writing end
    # (O_RDWR does not wait for a reader) until every cat has the FIFO
    # open: a cat that came later would wait for a writer for ever.
    writer = os.open(gate, os.O_RDWR | os.O_CLOEXEC)
    callers = [subprocess.Popen(["sh", "-c", 'cat "$0" >/dev/null; exec "$@"', str(gate), PREBIND, "--share=web",
                                 "--print=addr", "--", *HTTP],
                                env=runtime, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
               for _ in range(16)]
    try:
        def at_the_gate(caller):
            return any(has_open(pid, gate) for pid in children(caller.pid))

        assert wait_for(lambda: all(at_the_gate(c) for c in callers)), "not every caller reached the gate"
        os.close(writer)
        writer = -1
        addresses = {first_line(c) for c in callers}
        assert len(addresses) == 1, addresses
        # Published once the socket listens: COMMAND may not have written
        # its pid yet (seen under load).
        assert wait_for(lambda: pids(runtime)), "the server never wrote its pid"
        assert len(pids(runtime)) == 1, pids(runtime)
        assert "16 holders" in status(runtime, "web").stdout
        supervisor = supervisor_pid(runtime, "web")
    finally:
        if writer >= 0:
            os.close(writer)
        for c in callers:
            c.terminate()
        for c in callers:
            assert c.wait(timeout=TIMEOUT) == 0, c.stderr.read()
    gone(runtime, [*pids(runtime), supervisor], int(addresses.pop().rsplit(":", 1)[1]))


def has_open(pid, path):
    """Whether process pid has path open."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_holder_during_the_linger_keeps_the_server(runtime):
    # The second holder comes once the server has no holder: within the
    # 5 s linger, even on a loaded machine.
    a = holder(["--share=web", "--share-linger=5s", "--print", "--", *HTTP], runtime)
    port = first_line(a)
    # Published once the socket listens, maybe before the server's shell
    # has run (seen once in CI, on a loaded machine): its pid, bounded.
    assert wait_for(lambda: pids(runtime)), "the server never wrote its pid"
    a.terminate()
    assert a.wait(timeout=TIMEOUT) == 0
    assert wait_for(lambda: "0 holders" in status(runtime, "web").stdout, timeout=5, interval=0.05), "no linger"
    b = holder(["--share=web", "--share-linger=5s", "--print", "--", *HTTP], runtime)
    try:
        assert first_line(b) == port
        assert len(pids(runtime)) == 1
        supervisor = supervisor_pid(runtime, "web")
    finally:
        b.terminate()
        assert b.wait(timeout=TIMEOUT) == 0
    gone(runtime, [*pids(runtime), supervisor], int(port), bound=5 + SLACK)


def test_polling_status_does_not_keep_the_server(runtime):
    # A clean-up loop that waits for the server to go must not hold it:
    # only holders (and callers still attaching) count.
    a = holder(["--share=web", "--print", "--", *HTTP], runtime)
    port = first_line(a)
    supervisor = supervisor_pid(runtime, "web")
    a.terminate()
    assert a.wait(timeout=TIMEOUT) == 0
    wait_for(lambda: status(runtime, "web").returncode != 0, timeout=LINGER + SLACK, interval=0.1)
    assert status(runtime, "web").returncode == 3
    gone(runtime, [*pids(runtime), supervisor], int(port))


def test_stdin_hangup_and_parent_death_end_a_holder(runtime):
    # stdin a pipe: closing it lets go.
    a = holder(["--share=web", "--print", "--", *HTTP], runtime, stdin=subprocess.PIPE)
    port = first_line(a)
    assert wait_for(lambda: pids(runtime)), "the server never wrote its pid"
    a.stdin.close()
    assert a.wait(timeout=TIMEOUT) == 0
    # Its parent killed: the kernel's SIGTERM (PR_SET_PDEATHSIG) lets go.
    parent = subprocess.Popen(["sh", "-c", f'{PREBIND} --share=web --print -- "$@" </dev/null & wait', "sh", *HTTP],
                              env=runtime, stdout=subprocess.PIPE, text=True)
    assert first_line(parent) == port
    supervisor = supervisor_pid(runtime, "web")
    parent.kill()
    parent.wait(timeout=TIMEOUT)
    gone(runtime, [*pids(runtime), supervisor], int(port))
    assert len(pids(runtime)) == 1


# --------------------------------------------------------------- refusals

def test_another_command_under_the_same_name_is_refused(runtime):
    a = holder(["--share=web", "--print", "--", *HTTP], runtime)
    try:
        first_line(a)
        # Published once the socket listens: the server may not have
        # written its pid yet (the refused caller must not add one).
        assert wait_for(lambda: pids(runtime)), "the server never wrote its pid"
        out = subprocess.run([PREBIND, "--share=web", "--print", "-E", "X=1", "--", *HTTP], env=runtime,
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 125
        assert out.stdout == ""
        lines = out.stderr.splitlines()
        assert len(lines) == 1, out.stderr
        assert "--share=web runs another server" in lines[0]
        assert "--setenv=X=1" in lines[0] and "stdlib_http.py" in lines[0]
        assert len(pids(runtime)) == 1
    finally:
        a.terminate()
        a.wait(timeout=TIMEOUT)


def test_equal_sockets_spelled_differently_are_one_server(runtime):
    # prebind(1): no -l, -l 0 and -l 127.0.0.1:0 are one socket.
    callers = [holder(["--share=web", *spelling, "--print", "--", *HTTP], runtime)
               for spelling in ([], ["-l", "0"], ["-l", "127.0.0.1:0"], ["--listen=tcp:localhost:0"])]
    try:
        addresses = [first_line(c) for c in callers]
        assert len(set(addresses)) == 1 and addresses[0], [c.stderr.read() for c in callers if c.poll()]
        # Published once the socket listens: the pid may come a moment later.
        assert wait_for(lambda: pids(runtime)), "the server never wrote its pid"
        assert len(pids(runtime)) == 1
    finally:
        for c in callers:
            c.terminate()
            c.wait(timeout=TIMEOUT)


@pytest.mark.parametrize("args, message", [
    (["--share=a/b", "--", "true"], "--share: 'a/b': expected a name"),
    (["--share=.hidden", "--", "true"], "--share: '.hidden': expected a name"),
    (["--share=" + "x" * 65, "--", "true"], "expected a name"),
    (["--status"], "--status and --stop need --share=NAME"),
    (["--share=x", "--status", "--", "true"], "takes no COMMAND"),
    (["--share=x", "--exec", "--", "true"], "--share needs one supervised COMMAND"),
    (["--share-linger=5s", "--", "true"], "--share-linger needs --share=NAME"),
    (["--share=x", "--share-linger=soon", "--", "true"], "--share-linger: 'soon'"),
])
def test_bad_share_usage(runtime, args, message):
    out = subprocess.run([PREBIND, *args], env=runtime, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 125
    assert len(out.stderr.splitlines()) == 1 and message in out.stderr, out.stderr
    assert leftovers(runtime) == []


@pytest.fixture
def as_nobody():
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to nobody")
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


CONNECT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print(type(e).__name__)
"""


def nobody_runtime():
    """An XDG_RUNTIME_DIR of nobody's own (0700), as a login session has."""
    directory = tempfile.mkdtemp(prefix="pbn-")
    os.chown(directory, NOBODY, NOBODY)
    return directory


def test_another_user_can_neither_attach_nor_squat(runtime, as_nobody):
    env = dict(runtime, PIDS="/dev/null")
    name = f"sq{os.getpid()}"
    mine = share_dir(runtime)
    theirs_dir = nobody_runtime()
    a = holder([f"--share={name}", "--print", "--", *HTTP], env)
    try:
        port = first_line(a)
        st = os.lstat(mine)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        # nobody cannot reach the socket, read the address or the log.
        out = subprocess.run([PYTHON, "-c", CONNECT, f"{mine}/{name}.sock"], capture_output=True, text=True,
                             timeout=TIMEOUT, **as_nobody)
        assert out.stdout.strip() == "PermissionError", out
        # The same name as nobody is nobody's own server, not root's.
        theirs = subprocess.Popen([public_prebind(), f"--share={name}", "--print", "--", *HTTP],
                                  env=dict(env, XDG_RUNTIME_DIR=theirs_dir), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, **as_nobody)
        try:
            assert first_line(theirs) != port
        finally:
            theirs.terminate()
            assert theirs.wait(timeout=TIMEOUT) == 0, theirs.stderr.read()
    finally:
        a.terminate()
        a.wait(timeout=TIMEOUT)
        assert wait_for(lambda: not os.path.isdir(f"{theirs_dir}/prebind") or not os.listdir(f"{theirs_dir}/prebind"),
                        timeout=LINGER + SLACK)
        shutil.rmtree(theirs_dir, ignore_errors=True)
    assert wait_for(lambda: not os.path.exists(f"{mine}/{name}.sock"), timeout=LINGER + SLACK)


def test_a_share_directory_not_the_callers_alone_is_refused(tmp_path, runtime, as_nobody):
    # Only root could have made it so (the runtime directory is root's,
    # 0700): prebind checks what it did not make all the same.
    os.mkdir(share_dir(runtime), 0o700)
    os.chown(share_dir(runtime), NOBODY, NOBODY)
    out = subprocess.run([PREBIND, "--share=x", "--print", "--", *HTTP], env=runtime, capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode == 125
    assert len(out.stderr.splitlines()) == 1 and "refusing to share through it" in out.stderr, out.stderr
    assert pids(runtime) == []
    # A symlink in its place is refused the same way (lstat).
    os.rmdir(share_dir(runtime))
    os.symlink(str(tmp_path), share_dir(runtime))
    out = subprocess.run([PREBIND, "--share=x", "--print", "--", *HTTP], env=runtime, capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode == 125 and "refusing to share through it" in out.stderr, out.stderr
    os.unlink(share_dir(runtime))


# Run in a mount namespace of its own, with a fresh /tmp and /run (as a
# machine just booted): nobody makes /tmp/prebind-0 first, then root's
# --share without XDG_RUNTIME_DIR (a CI runner's) must still work, in a
# directory nobody could have made. Then --status, --stop.
SQUATTED = r"""
import os, stat, subprocess, sys
prebind, nobody = sys.argv[1], ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
subprocess.run([*nobody, "mkdir", "-m", "0700", "/tmp/prebind-0"], check=True)
env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
a = subprocess.Popen([prebind, "--share=sq", "--print", "--", "sleep", "100"], env=env, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
line = a.stdout.readline().strip()
if not line:
    sys.exit("no address: " + a.stderr.read())
for d in (os.path.dirname(p) for p in ("/run/prebind/sq.sock",) if os.path.exists(p)):
    st = os.lstat(d)
    print("share dir", d, oct(stat.S_IMODE(st.st_mode)), st.st_uid)
out = subprocess.run([prebind, "--share=sq", "--status"], env=env, capture_output=True, text=True)
print("status", out.returncode, out.stdout.splitlines()[0] if out.stdout else out.stderr)
a.terminate()
print("holder", a.wait(timeout=20))
out = subprocess.run([prebind, "--share=sq", "--stop"], env=env, capture_output=True, text=True, timeout=20)
print("stop", out.returncode, sorted(os.listdir("/run/prebind")), os.lstat("/tmp/prebind-0").st_uid)
"""


def test_a_squatted_tmp_directory_does_not_stop_roots_share(as_nobody):
    if not shutil.which("unshare"):
        pytest.skip("needs unshare")
    # Never --propagation unchanged: the tmpfs on /tmp could reach the
    # host's mounts. Where private fails (a chroot whose / is no mount
    # point), skipped.
    if subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                      timeout=TIMEOUT).returncode != 0:
        pytest.skip("cannot make a private mount namespace here")
    # The binary may be under the /tmp that the mount hides: copied from
    # an fd opened before.
    script = ('exec 3<"$1" && mount -t tmpfs -o mode=1777 tmpfs /tmp && mount -t tmpfs -o mode=0755 tmpfs /run '
              f'&& mkdir /run/bin && cp /proc/self/fd/3 /run/bin/prebind && exec {PYTHON} -c "$0" /run/bin/prebind')
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, SQUATTED,
                          PREBIND], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out
    assert out.stdout.splitlines() == ["share dir /run/prebind 0o700 0", "status 0 sq: running, ready;"
                                       + out.stdout.splitlines()[1].split("ready;", 1)[1],
                                       "holder 0", "stop 0 [] 65534"], out


def test_without_a_directory_only_it_can_write_a_user_is_told(as_nobody):
    # nobody with root's HOME and no runtime directory: nowhere to share
    # that no other user could take first.
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    out = subprocess.run([public_prebind(), "--share=x", "--print", "--", "true"], env=dict(env, HOME="/root"),
                         capture_output=True, text=True, timeout=TIMEOUT, **as_nobody)
    assert out.returncode == 125
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "no directory that only uid 65534 can write" in out.stderr and "set XDG_RUNTIME_DIR" in out.stderr


def test_status_stop_and_a_too_long_name_make_no_directory(tmp_path):
    runtime = tempfile.mkdtemp(prefix="pbs-")
    try:
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        for action in ("--status", "--stop"):
            out = subprocess.run([PREBIND, "--share=web", action], env=env, capture_output=True, text=True,
                                 timeout=TIMEOUT)
            assert out.returncode in (0, 3), out
        long_dir = tmp_path / ("d" * 60)
        long_dir.mkdir(mode=0o700)
        out = subprocess.run([PREBIND, "--share=" + "x" * 40, "--", "true"], env=dict(env, XDG_RUNTIME_DIR=str(long_dir)),
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 125 and "too long for a unix socket path" in out.stderr, out.stderr
        assert os.listdir(runtime) == [] and os.listdir(long_dir) == []
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


# --------------------------------------------------------------- failure

CRASHER = ["sh", "-c", 'echo $$ >> "$PIDS"; echo ready; while [ ! -e "$STOP" ]; do sleep 0.05; done; '
           'echo "crashing now"; exit 3']


def test_a_server_that_crashes_is_every_holders_failure(tmp_path, runtime):
    env = dict(runtime, STOP=str(tmp_path / "stop"))
    holders = [holder(["--share=crash", "--ready-log=^ready$", "--print=addr", "--", *CRASHER], env)
               for _ in range(3)]
    addresses = {first_line(h) for h in holders}
    assert len(addresses) == 1
    (tmp_path / "stop").touch()
    for h in holders:
        assert h.wait(timeout=TIMEOUT) == 3
        err = h.stderr.read()
        assert "--share=crash: the server ended with exit status 3" in err
        assert "crashing now" in err
    assert wait_for(lambda: leftovers(runtime) == [], timeout=TIMEOUT)
    # The next caller starts a new one.
    os.unlink(tmp_path / "stop")
    again = holder(["--share=crash", "--ready-log=^ready$", "--print=addr", "--", *CRASHER], env)
    try:
        first_line(again)
        assert len(pids(runtime)) == 2
    finally:
        again.terminate()
        again.wait(timeout=TIMEOUT)


def test_a_server_that_cannot_start_is_told_to_the_holder(runtime):
    out = subprocess.run([PREBIND, "--share=bad", "-l", "127.0.0.1:1", "--print", "--", "true"], env=runtime,
                         capture_output=True, text=True, timeout=TIMEOUT)
    if os.geteuid() == 0:
        out = subprocess.run([PREBIND, "--share=bad", "-l", "/nonexistent/dir/s.sock", "--print", "--", "true"],
                             env=runtime, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 125
    assert "the server ended with exit status 125" in out.stderr
    assert "cannot listen on" in out.stderr
    assert wait_for(lambda: leftovers(runtime) == [], timeout=TIMEOUT)


# --------------------------------------------------------------- --status, --stop

def test_status_and_stop(runtime):
    out = status(runtime, "web")
    assert out.returncode == 3 and out.stdout == "web: not running\n"
    a = holder(["--share=web", "--share-linger=infinity", "--print=url", "--", *HTTP], runtime)
    url = first_line(a)
    out = status(runtime, "web")
    assert out.returncode == 0, out
    assert "web: running, ready;" in out.stdout and "1 holder\n" in out.stdout
    assert f"listening on {url}" in out.stdout
    # Published before COMMAND runs (no readiness condition): its pid may
    # be written a moment later.
    assert wait_for(lambda: pids(runtime))
    assert f"server pid {pids(runtime)[0]}" in out.stdout
    supervisor = supervisor_pid(runtime, "web")
    a.terminate()
    assert a.wait(timeout=TIMEOUT) == 0
    # infinity: it stays without holders, until --stop (beyond the
    # default linger, which would have stopped it).
    assert wait_for(lambda: "0 holders" in status(runtime, "web").stdout)
    assert_nothing_within(LINGER + 0.5, "the server stopped", lambda: not pid_alive(supervisor))
    assert "0 holders" in status(runtime, "web").stdout
    out = subprocess.run([PREBIND, "--share=web", "--stop"], env=runtime, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 0, out
    # --stop returns once the supervisor is done (it may still be exiting).
    assert wait_for(lambda: not pid_alive(supervisor))
    gone(runtime, [*pids(runtime), supervisor], int(url.rsplit(":", 1)[1]), bound=SLACK)
    assert status(runtime, "web").returncode == 3
    out = subprocess.run([PREBIND, "--share=web", "--stop"], env=runtime, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 0 and "not running" in out.stderr


def accepted_fds(pid, path):
    """pid's fds that are connections accepted on the unix socket at path
    (in /proc/net/unix, connected ones bound to path)."""
    with open("/proc/net/unix") as f:
        # Num RefCount Protocol Flags Type St Inode Path; St 03: connected
        inodes = {fields[6] for fields in (line.split() for line in f.readlines()[1:])
                  if len(fields) == 8 and fields[7] == path and fields[5] == "03"}
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue  # closed meanwhile
        if link.startswith("socket:[") and link[8:-1] in inodes:
            fds.append(int(fd))
    return fds


def test_out_of_fds_the_server_backs_off_and_accepts_later(runtime):
    """The supervisor has no fd left for a caller's connection: EMFILE. It
    neither spins on its listening socket nor stops (issue 21: the one
    accept(2) policy of --accept and the forwarder): the caller waits in
    the backlog, and once fds are free again it is served."""
    if not shutil.which("prlimit"):
        pytest.skip("needs prlimit (util-linux)")
    a = holder(["--share=web", "--share-linger=infinity", "--print", "--", *HTTP], runtime)
    first_line(a)
    supervisor = supervisor_pid(runtime, "web")
    a.terminate()
    assert a.wait(timeout=TIMEOUT) == 0
    # The supervisor closes a connection (the holder's, --status's) only
    # once it has read its end: counted before, such an fd would be free
    # below the limit by the time the caller connects, and accepted into.
    sock = os.path.join(share_dir(runtime), "web.sock")
    assert wait_for(lambda: not accepted_fds(supervisor, sock)), accepted_fds(supervisor, sock)
    # Every fd number below the lowest free one is taken: no new fd.
    used = {int(fd) for fd in os.listdir(f"/proc/{supervisor}/fd")}
    lowest_free = min(set(range(len(used) + 1)) - used)
    subprocess.run(["prlimit", f"--pid={supervisor}", f"--nofile={lowest_free}:"], check=True, timeout=TIMEOUT)
    caller = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        caller.connect(os.path.join(share_dir(runtime), "web.sock"))  # queued in the backlog
        cpu_before, t0 = cpu_seconds(supervisor), time.monotonic()
        # Spinning shows only over time: a second of it, measured.
        assert_nothing_within(1.0, "the server stopped", lambda: not pid_alive(supervisor))
        spent = cpu_seconds(supervisor) - cpu_before
        assert spent < 0.5 * (time.monotonic() - t0), f"the server spun: {spent:.2f} s of CPU in 1 s"
        log = pathlib.Path(share_dir(runtime), "web.log")
        assert wait_for(lambda: "--share: cannot accept: Too many open files" in log.read_text()), log.read_text()
        subprocess.run(["prlimit", f"--pid={supervisor}", "--nofile=1024:"], check=True, timeout=TIMEOUT)
        # Accepting again: the caller, then --status behind it.
        out = status(runtime, "web")
        assert out.returncode == 0 and "web: running, ready;" in out.stdout, out
    finally:
        caller.close()
        subprocess.run(["prlimit", f"--pid={supervisor}", "--nofile=1024:"], timeout=TIMEOUT)
    out = subprocess.run([PREBIND, "--share=web", "--stop"], env=runtime, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 0, out
    gone(runtime, [*pids(runtime), supervisor], bound=LINGER + SLACK)

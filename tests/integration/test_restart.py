"""--restart: the sockets stay open while no COMMAND runs, so clients
under continuous load see no refused or failed request across kills,
crashes and restarts on demand."""

import os
import signal
import threading
import time
import http.client

import pytest

from conftest import EXAMPLE_C_SERVER, PREBIND, PYTHON, TIMEOUT, children, pid_alive, run, server, wait_for


class Load:
    """Client threads sending sequential requests (a new connection each)
    until stopped or a bound on count is reached; counts failures, keeps
    the answers each thread got in order, and the slowest answer's time."""

    def __init__(self, port, threads=4, max_requests=20000):
        self.port, self.max = port, max_requests
        self.ok, self.failed, self.pids, self.errors = 0, 0, set(), []
        self.bodies, self.slowest = [[] for _ in range(threads)], 0.0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def run(self, i):
        while not self.stop.is_set():
            with self.lock:
                if self.ok + self.failed >= self.max:
                    return
            began = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
                c.request("GET", "/")
                r = c.getresponse()
                body = r.read().decode()
                c.close()
                assert r.status == 200, r.status
                with self.lock:
                    self.ok += 1
                    self.pids.add(body.strip())
                    self.bodies[i].append(body.strip())
                    self.slowest = max(self.slowest, time.monotonic() - began)
            except Exception as e:  # noqa: BLE001 - every failure counts
                with self.lock:
                    self.failed += 1
                    self.errors.append(repr(e))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(TIMEOUT)

    def wait_requests(self, n, timeout=TIMEOUT):
        start = self.ok
        return wait_for(lambda: self.ok >= start + n, timeout=timeout)


def command_pid(p):
    def child():
        try:
            kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        except FileNotFoundError:
            return None
        return int(kids[0]) if kids else None
    assert wait_for(child)
    return child()


def test_killed_repeatedly_under_load_no_request_fails(start):
    p = start(["--print", "--restart=always", "--restart-limit=0", "--", PYTHON, server("restartable_http.py")])
    port = int(p.readline())
    killed = set()
    with Load(port) as load:
        for _ in range(5):
            assert load.wait_requests(20)
            pid = command_pid(p)
            os.kill(pid, signal.SIGTERM)  # not prebind: COMMAND itself goes away
            killed.add(pid)
            assert wait_for(lambda: command_pid(p) not in killed)
        assert load.wait_requests(20)
    assert load.failed == 0, load.errors[:5]
    assert len(load.pids) >= 6  # answers came from six different servers
    assert p.stop() == 0


def test_crashes_with_restart_on_failure_no_request_fails(start, tmp_path):
    starts = tmp_path / "starts"
    p = start(["--print", "--restart=on-failure", "--restart-limit=50/10s", "--", PYTHON,
               server("restartable_http.py"), "--crash-after", "25", "--count-starts", str(starts)])
    port = int(p.readline())
    with Load(port, max_requests=150) as load:
        assert wait_for(lambda: load.ok + load.failed >= 150, timeout=60)
    assert load.failed == 0, load.errors[:5]
    assert len(starts.read_text().split()) >= 6  # 150 answers, a crash every 25
    assert p.stop() == 0


def test_restart_limit_gives_up_with_commands_status(tmp_path):
    starts = tmp_path / "starts"
    out = run(["--restart=on-failure", "--restart-delay=0", "--restart-limit=3/10s", "--", "sh", "-c",
               f"echo x >> {starts}; exit 7"])
    assert out.returncode == 7
    assert len(starts.read_text().split()) == 4  # the first start and three restarts
    assert "restarted 3 times within 10.0s: giving up" in out.stderr


def test_on_failure_does_not_restart_a_success_and_always_does(tmp_path):
    starts = tmp_path / "starts"
    out = run(["-q", "--restart=on-failure", "--", "sh", "-c", f"echo x >> {starts}; exit 0"])
    assert out.returncode == 0 and len(starts.read_text().split()) == 1
    starts.unlink()
    out = run(["-q", "--restart=always", "--restart-delay=10ms", "--restart-limit=2/10s", "--", "sh", "-c",
               f"echo x >> {starts}; exit 0"])
    assert out.returncode == 0 and len(starts.read_text().split()) == 3


def test_sigterm_during_the_restart_delay_ends_prebind(start, tmp_path):
    starts = tmp_path / "starts"
    p = start(["-q", "--restart=always", "--restart-delay=30s", "--", "sh", "-c", f"echo x >> {starts}; exit 4"])
    assert wait_for(lambda: starts.exists())
    # COMMAND has exited: prebind waits out the delay with no child left.
    assert wait_for(lambda: not children(p.pid))
    p.send(signal.SIGTERM)
    assert p.wait(timeout=5) == 4


def test_restart_on_demand_with_sighup_under_load(start, tmp_path):
    starts = tmp_path / "starts"
    p = start(["--print", "--restart=no", "--", PYTHON, server("restartable_http.py"), "--count-starts",
               str(starts)])
    port = int(p.readline())
    first = command_pid(p)
    with Load(port) as load:
        for _ in range(3):
            assert load.wait_requests(20)
            before = command_pid(p)
            p.send(signal.SIGHUP)  # as a file watcher would
            assert wait_for(lambda: command_pid(p) not in (None, before))
        assert load.wait_requests(20)
    assert load.failed == 0, load.errors[:5]
    assert command_pid(p) != first
    assert len(starts.read_text().split()) == 4
    assert p.stop() == 0


def test_ready_is_waited_for_again_after_each_restart(start, tmp_path):
    outer_pf = tmp_path / "port"
    p = start(["-v", "--ready=20s", f"--port-file={outer_pf}", "--", PREBIND, "-v", "--ready=20s",
               "--restart=always", "--", EXAMPLE_C_SERVER, "--notify-after=0.2"])
    assert wait_for(outer_pf.exists)
    inner = command_pid(p)
    server_pid = int(open(f"/proc/{inner}/task/{inner}/children").read().split()[0])
    os.kill(server_pid, signal.SIGTERM)
    assert wait_for(lambda: p.proc.poll() is None and open(f"/proc/{inner}/task/{inner}/children").read().split()
                    not in ([], [str(server_pid)]))
    p.wait_stderr(f"READY=1 from pid {inner}", count=2)  # the new server's, after its 0.2 s
    p.stop()
    err = p.err
    assert "is reloading" in err, err  # the inner prebind told its manager RELOADING=1
    assert err.count(f"READY=1 from pid {inner}") == 2, err  # ...and READY=1 again


# A member of COMMAND's group that ignores SIGTERM and says its pid.
STUBBORN_MEMBER = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)")


def test_a_group_left_during_the_restart_delay_is_stopped_before_prebind_exits(start, tmp_path):
    """--group --restart: COMMAND exits and leaves a member that ignores
    SIGTERM; prebind is told to stop during the restart delay. The member
    is a retiree: SIGKILL after its grace, and prebind exits only then
    (it exited at once, and the member outlived it)."""
    member_pid = tmp_path / "member"
    p = start(["-v", "--group", "--restart=always", "--restart-delay=60s", "--kill-after=1s", "--", "sh", "-c",
               f'"$0" -c "{STUBBORN_MEMBER}" {member_pid} & sleep 0.5; exit 1', PYTHON])
    p.wait_stderr("told to stop")
    assert wait_for(member_pid.exists)
    member = int(member_pid.read_text())
    p.send(signal.SIGTERM)
    try:
        assert p.wait() == 1
        assert not pid_alive(member), "the member outlived prebind"
    finally:
        if pid_alive(member):
            os.kill(member, signal.SIGKILL)


def test_restarts_leave_the_guard_no_group_of_an_ended_generation(start):
    """--group --restart: each COMMAND leaves a member that SIGTERM ends
    during the restart delay. When prebind is SIGKILLed after a few
    restarts, its guard stops the one generation alive, and signals no
    process group of the ended ones (their numbers may be anyone's by
    then: it stopped them all, one a generation)."""
    p = start(["-v", "--group", "--restart=always", "--restart-limit=0", "--restart-delay=200ms", "--", "sh", "-c",
               "sleep 60 & sleep 0.3; exit 1"])
    p.wait_stderr("restarting it", count=4)
    p.send(signal.SIGKILL)  # (SIGKILL: the guard stops what is left)
    p.wait()
    # Everything the guard wrote: it holds stderr until it is done. One
    # line (none if the kill came in a restart delay, with nothing alive).
    err = p.stderr_text(timeout=TIMEOUT)
    assert err.count("was killed: stopping") <= 1, err

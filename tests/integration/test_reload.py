"""--reload=overlap and --watch (issue 24): on a reload request the new
COMMAND starts on the same sockets while the old one serves; the old one
is told to stop only once the new one is ready; a new one that fails
leaves the old one serving. Clients open a new connection per request and
must see no failure, and only answers of ready servers."""

import os
import shutil
import signal
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, assert_nothing_within, pid_alive, run, server, wait_for
from test_restart import Load

SERVER = server("generation_http.py")
# The reload under test (a later option wins): PREBIND_TEST_RELOAD=restart
# shows what the tests catch without the overlap.
RELOAD = [f"--reload={os.environ['PREBIND_TEST_RELOAD']}"] if os.environ.get("PREBIND_TEST_RELOAD") else []


class Generations(Load):
    """The load of test_restart, reading each answer's generation."""

    def __init__(self, port, threads=3):
        super().__init__(port, threads=threads, max_requests=10**7)

    def seen(self):
        """The generations each client saw, in order."""
        with self.lock:
            return [[int(b.split()[0].split("=")[1]) for b in bodies] for bodies in self.bodies]

    def answers(self):
        with self.lock:
            return [dict(f.split("=", 1) for f in b.split()) for bodies in self.bodies for b in bodies]

    def latest(self):
        return max((s[-1] for s in self.seen() if s), default=0)

    def wait_generation(self, n, timeout=TIMEOUT):
        return wait_for(lambda: self.latest() >= n, timeout=timeout)


def generation_file(state):
    try:
        return int((state / "generation").read_text() or 0)
    except (FileNotFoundError, ProcessLookupError):
        return 0


def start_overlap(start, state, *extra, ready=("--ready",), delay=1.0):
    p = start(["-v", "--print", "--reload=overlap", *RELOAD, *ready, *extra, "--", PYTHON, SERVER, str(state),
               "--start-delay", str(delay)])
    return p, int(p.readline())


# A generation's start-up, where a client must not wait: 2 s, so that an
# answer slower than WAITED_FOR tells a client that waited for one (a
# stop-then-start) from one slowed down by a loaded machine.
SLOW_START, WAITED_FOR = 2.0, 1.5


def test_twenty_overlapping_reloads_under_load_lose_nothing(start, tmp_path):
    # Each generation needs SLOW_START to start: with stop-then-start
    # (--reload=restart) no request fails either (the socket stays open),
    # but requests wait for that start-up at each reload: the bound on the
    # slowest answer is what fails then.
    p, port = start_overlap(start, tmp_path, delay=SLOW_START)
    with Generations(port) as load:
        assert load.wait_generation(1)
        for n in range(2, 22):
            p.send(signal.SIGHUP)
            assert load.wait_generation(n), (n, load.latest(), load.errors[:3])
        # Every client on the last one (the one before may still drain).
        assert wait_for(lambda: all(s and s[-1] == 21 for s in load.seen())), load.seen()
    assert load.failed == 0, load.errors[:5]
    assert load.slowest < WAITED_FOR, load.slowest  # nobody waited for a start-up
    assert all(a["ready"] == "1" for a in load.answers())
    # Each client saw the generations increase; the one just replaced may
    # still answer what it had accepted when SIGTERM came (its drain).
    for seen in load.seen():
        top = 0
        for g in seen:
            assert g >= top - 1, seen
            top = max(top, g)
    assert load.latest() == 21 and generation_file(tmp_path) == 21
    assert p.stop() == 0
    assert "generation 21 ready, serving" in p.err, p.err
    assert "reload failed" not in p.err


def test_a_new_generation_that_crashes_or_never_gets_ready_leaves_the_old_one_serving(start, tmp_path):
    p, port = start_overlap(start, tmp_path, "--ready-timeout=2s",
                            ready=("--ready-log=^generation [0-9]+ ready$",))
    with Generations(port) as load:
        assert load.wait_generation(1)
        (tmp_path / "crash").touch()
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 2)
        p.wait_stderr("reload failed: generation 1 keeps serving")
        (tmp_path / "crash").unlink()
        (tmp_path / "hang").touch()
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 3)
        p.wait_stderr("reload failed: generation 1 keeps serving", count=2)  # after --ready-timeout
        assert p.proc.poll() is None
        assert load.latest() == 1  # still the first one
        (tmp_path / "hang").unlink()
        p.send(signal.SIGHUP)
        assert load.wait_generation(4)
    assert load.failed == 0, load.errors[:5]
    assert {a["generation"] for a in load.answers()} <= {"1", "4"}
    assert p.stop() == 0  # neither failure is prebind's exit status
    err = p.err
    assert "exited before it was ready, with status 3" in err, err
    assert "generation 2: cannot start, crashing" in err, err  # its last lines, shown
    assert "wrote no line that matches --ready-log" in err and "within 2.0s" in err, err
    assert err.count("reload failed: generation 1 keeps serving") == 2, err


def test_after_a_failed_reload_the_guard_still_stops_the_serving_generation(start, tmp_path):
    """The guard watches the newest COMMAND: after a new generation failed,
    the one that serves again is watched again, its group included, so a
    SIGKILLed prebind leaves nothing of it (the parent-death signal alone
    reaches COMMAND, not the rest of its group)."""
    sleepers = tmp_path / "sleepers"
    command = ["sh", "-c", f'sleep 1000 & echo $! >> {sleepers}; exec "$0" "$@"', PYTHON, SERVER, str(tmp_path)]
    log = tmp_path / "stderr"
    with open(log, "w") as f:
        p = start(["--print", "--reload=overlap", "--group", "--ready-log=^generation [0-9]+ ready$", "--", *command],
                  stderr=f)
    int(p.readline())
    assert wait_for(lambda: generation_file(tmp_path) == 1)
    (tmp_path / "crash").touch()
    p.send(signal.SIGHUP)
    assert wait_for(lambda: generation_file(tmp_path) == 2)
    assert wait_for(lambda: "reload failed: generation 1 keeps serving" in log.read_text()), log.read_text()
    first = int(sleepers.read_text().split()[0])
    try:
        assert pid_alive(first)
        p.proc.kill()
        assert wait_for(lambda: not pid_alive(first), timeout=5), "generation 1's group outlived prebind"
    finally:
        for pid in (int(x) for x in sleepers.read_text().split()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_reloads_requested_during_a_reload_are_coalesced(start, tmp_path):
    p, port = start_overlap(start, tmp_path)
    with Generations(port) as load:
        assert load.wait_generation(1)
        p.send(signal.SIGHUP)
        p.wait_stderr("reloading: generation 2 starts beside generation 1")
        for _ in range(4):  # the kernel may merge them: one pending SIGHUP
            p.send(signal.SIGHUP)
        p.wait_stderr("one more follows it")
        assert load.wait_generation(3)
        p.wait_stderr("generation 3 ready, serving")
        # A fourth would start now (no event marks that none does); 1.5 s
        # is more than its start-up to the generation file.
        assert_nothing_within(1.5, "a fourth generation", lambda: generation_file(tmp_path) > 3)
    assert generation_file(tmp_path) == 3  # the first, and one more for the four others
    assert load.failed == 0, load.errors[:5]
    assert p.stop() == 0
    assert "one more follows it" in p.err


def test_the_old_generation_exiting_during_a_reload_leaves_the_new_one(start, tmp_path):
    p, port = start_overlap(start, tmp_path)
    with Generations(port) as load:
        assert load.wait_generation(1)
        old = int(load.answers()[-1]["pid"])
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 2)
        os.kill(old, signal.SIGKILL)  # its status (137) is not prebind's
        assert wait_for(lambda: not pid_alive(old))
        assert load.wait_generation(2)
        p.wait_stderr("generation 1 exited with status 137 during the reload")
        # Had prebind taken that exit for its own, it would be gone by now.
        assert_nothing_within(0.2, "prebind exited", lambda: p.proc.poll() is not None)
    assert p.proc.poll() is None
    assert p.stop() == 0
    assert "generation 1 exited with status 137 during the reload" in p.err, p.err


def test_only_the_new_generations_ready_counts_and_the_old_ones_status_is_relayed(start, tmp_path):
    p, port = start_overlap(start, tmp_path)
    with Generations(port) as load:
        assert load.wait_generation(1)
        old = int(load.answers()[-1]["pid"])
        (tmp_path / "hang").touch()  # the new one is never ready...
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 2)
        os.kill(old, signal.SIGUSR1)  # ...and the old one says READY=1 again
        p.wait_stderr("generation 1 says hello")  # its STATUS=, with READY=1
        # Taken for the new one's, it would have the old one stopped.
        assert_nothing_within(1.0, "generation 1 stopped", lambda: not pid_alive(old))
        assert pid_alive(old) and load.latest() == 1
    assert p.stop() == 0
    assert "generation 1 says hello" in p.err, p.err
    before_stop = p.err.split("shutdown:")[0]
    assert "generation 2 ready" not in before_stop and "told to stop" not in before_stop, p.err


def test_ready_log_counts_only_the_new_generations_lines(start, tmp_path):
    # Each generation writes to pipes of its own: the serving one's ready
    # line (it prints it again on SIGUSR1) is relayed, and does not make
    # the new one ready. (With one pipe for both it did: generation 1
    # was told to stop for generation 2, which never answered.)
    p, port = start_overlap(start, tmp_path, ready=("--ready-log=^generation [0-9]+ ready$",))
    with Generations(port) as load:
        assert load.wait_generation(1)
        old = int(load.answers()[-1]["pid"])
        (tmp_path / "hang").touch()
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 2)
        p.wait_stderr("generation 2 starting")  # relayed from its own pipe
        os.kill(old, signal.SIGUSR1)
        p.wait_stderr("generation 1 ready\n", count=2)
        # Taken for the new one's, it would have the old one stopped.
        assert_nothing_within(1.0, "generation 1 stopped", lambda: not pid_alive(old))
        assert pid_alive(old) and load.latest() == 1
        (tmp_path / "hang").unlink()
        assert load.wait_generation(2)  # its own line counts
    assert load.failed == 0, load.errors[:5]
    assert p.stop() == 0
    assert p.err.count("generation 1 ready\n") == 2, p.err  # both relayed


def test_sigterm_during_a_reload_stops_both_generations(start, tmp_path):
    p, port = start_overlap(start, tmp_path)
    with Generations(port) as load:
        assert load.wait_generation(1)
        old = int(load.answers()[-1]["pid"])
        (tmp_path / "hang").touch()  # the new one is never ready
        p.send(signal.SIGHUP)
        assert wait_for(lambda: generation_file(tmp_path) == 2)
        assert p.stop() == 0  # the new one's status: SIGTERM, a clean exit
    assert not pid_alive(old)
    assert "generation 1 (pid %d) told to stop" % old in p.err, p.err


def test_the_manager_hears_reloading_then_ready_with_the_generation(start, tmp_path):
    # prebind under prebind --ready: the outer one is the manager, and
    # logs what the inner one tells it (-v: "is reloading", STATUS=).
    outer_pf = tmp_path / "port"
    p = start(["-v", "--ready=20s", f"--port-file={outer_pf}", "--", PREBIND, "--reload=overlap", "--ready",
               "--", PYTHON, SERVER, str(tmp_path), "--start-delay", "0.3"])
    assert wait_for(outer_pf.exists)
    p.send(signal.SIGHUP)  # forwarded to the inner prebind, which reloads
    assert wait_for(lambda: generation_file(tmp_path) == 2)
    p.wait_stderr(": generation 2 serving")
    p.stop()
    err = p.err
    assert "is reloading" in err, err
    # The first STATUS= names generation 1 too (with the addresses).
    assert err.index("; generation 1 serving") < err.index("is reloading") < err.index(": generation 2 serving"), err


def test_overlap_needs_a_readiness_condition():
    out = run(["--reload=overlap", "--", "true"])
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and "--reload=overlap needs a readiness condition" in out.stderr
    out = run(["--reload=sometimes", "--", "true"])
    assert out.returncode == 125 and "expected restart or overlap" in out.stderr


# ---- --watch ------------------------------------------------------------------

def start_watching(start, state, tree, *extra, delay=0.8):
    p = start(["-v", "--print", "--reload=overlap", *RELOAD, "--ready", f"--watch={tree}", *extra, "--", PYTHON,
               SERVER, str(state), "--start-delay", str(delay)])
    return p, int(p.readline())


def save(path, how, n):
    """One save, as an editor or a tool makes it."""
    if how == "in place":
        with open(path, "w") as f:
            f.write(f"v = {n}\n")
    elif how == "rename over":
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"v = {n}\n")
        os.rename(tmp, path)
    else:  # a new file in a new subdirectory
        sub = path.parent / f"pkg{n}"
        sub.mkdir()
        (sub / "mod.py").write_text(f"v = {n}\n")


def test_watch_a_hundred_saves_reload_debounced_with_no_failed_request(start, tmp_path):
    # 100 saves in 10 bursts (10 ms apart, 1 s between bursts): with
    # --watch-delay=100ms each burst is one reload, and with the overlap
    # no client sees a refused or reset connection.
    state, tree = tmp_path / "state", tmp_path / "src"
    state.mkdir()
    tree.mkdir()
    app = tree / "app.py"
    app.write_text("v = 0\n")
    # A burst's saves come 10 ms apart: 250 ms of quiet ends it, which a
    # loaded machine seldom makes inside one.
    p, port = start_watching(start, state, tree, "--watch-delay=250ms", delay=SLOW_START)
    kinds = ["in place", "rename over", "new file in a new subdirectory"]
    with Generations(port) as load:
        assert load.wait_generation(1)
        for burst in range(10):
            for i in range(10):
                save(app, kinds[(burst * 10 + i) % 3], burst * 10 + i)
                time.sleep(0.01)  # not a wait: the saves' pace is the test's input
            assert load.wait_generation(2 + burst), (burst, load.latest())
            # Settled: no reload under way, so the next burst is a new one.
            assert wait_for(lambda: load.latest() == generation_file(state)), (load.latest(), generation_file(state))
        # No reload under way when it stops (a split burst makes one
        # more): a generation stopped while it starts dies of SIGTERM.
        assert wait_for(lambda: load.latest() == generation_file(state)), (load.latest(), generation_file(state))
    assert load.failed == 0, load.errors[:5]
    assert load.slowest < WAITED_FOR, load.slowest
    reloads = generation_file(state) - 1
    assert 10 <= reloads <= 15, reloads  # one per burst; a burst split by a slow moment at worst: not one per save
    assert p.stop() == 0
    assert "--watch: '" in p.err and "' changed: reloading" in p.err, p.err


def test_watch_ignored_globs_do_not_reload(start, tmp_path):
    state, tree = tmp_path / "state", tmp_path / "src"
    state.mkdir()
    for d in (".git", "__pycache__", "node_modules/lib", "logs"):
        (tree / d).mkdir(parents=True)
    p, port = start_watching(start, state, tree, "--watch-ignore=*.log", "--watch-ignore=logs/*")
    with Generations(port) as load:
        assert load.wait_generation(1)
        (tree / ".git" / "index").write_text("x")
        (tree / "__pycache__" / "app.cpython-311.pyc").write_text("x")
        (tree / "node_modules" / "lib" / "index.js").write_text("x")
        (tree / ".app.py.swp").write_text("x")
        (tree / "app.py~").write_text("x")
        (tree / "4913").write_text("")
        (tree / "server.log").write_text("x")
        (tree / "logs" / "today").write_text("x")
        (tree / ".git" / "new").mkdir()
        # Ten times --watch-delay: a reload would have begun.
        assert_nothing_within(1.0, "a reload", lambda: generation_file(state) != 1)
        (tree / "app.py").write_text("x")  # and a real change does
        assert load.wait_generation(2)
    assert p.stop() == 0
    assert f"--watch: '{tree}/app.py' changed" in p.err, p.err


def test_watch_a_file_survives_rename_over_and_implies_restart_on_request(start, tmp_path):
    # No --reload, no --restart: --watch alone restarts on a change.
    conf = tmp_path / "app.conf"
    conf.write_text("a\n")
    starts = tmp_path / "starts"
    p = start(["-v", f"--watch={conf}", "--", "sh", "-c", f"echo x >> {starts}; exec sleep 60"])
    assert wait_for(lambda: starts.exists() and len(starts.read_text().split()) == 1)
    (tmp_path / "other").write_text("beside it: does not count\n")
    for n in range(2, 4):
        tmp = tmp_path / "app.conf.new"
        tmp.write_text(f"{n}\n")
        os.rename(tmp, conf)
        assert wait_for(lambda: len(starts.read_text().split()) == n), (n, starts.read_text())
        # One rename is one restart: a second would follow within
        # --watch-delay (100 ms).
        assert_nothing_within(0.3, "a second restart", lambda: len(starts.read_text().split()) > n)
    assert len(starts.read_text().split()) == 3
    p.stop()
    assert f"--watch: '{conf}' changed: restarting 'sh'" in p.err, p.err


def configmap(tmp_path, version, text):
    """A Kubernetes ConfigMap volume's update: the new version's folder,
    a link to it renamed over ..data (atomic), the old folder removed."""
    cfg = tmp_path / "cfg"
    (cfg / f"..v{version}").mkdir(parents=True)
    (cfg / f"..v{version}" / "key").write_text(text)
    os.symlink(f"..v{version}", cfg / "..data_tmp")
    os.rename(cfg / "..data_tmp", cfg / "..data")
    if version > 1:
        shutil.rmtree(cfg / f"..v{version - 1}")
    else:
        os.symlink("..data/key", cfg / "key")


def renamed_and_made_anew(tmp_path, n):
    os.rename(tmp_path / "src", tmp_path / f"src.{n}")
    (tmp_path / "src").mkdir()


@pytest.mark.parametrize("case", ["root renamed and made anew", "root removed and made anew",
                                  "symlinked file", "configmap ..data swap"])
def test_watch_follows_the_path_not_the_inode(start, tmp_path, case):
    starts = tmp_path / "starts"
    if case.startswith("root"):
        (tmp_path / "src").mkdir()
        watched = tmp_path / "src"
    elif case == "symlinked file":
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "app.conf").write_text("0\n")
        os.symlink(tmp_path / "data" / "app.conf", tmp_path / "app.conf")
        watched = tmp_path / "app.conf"
    else:
        configmap(tmp_path, 1, "0\n")
        watched = tmp_path / "cfg" / "key"
    p = start(["-v", f"--watch={watched}", "--", "sh", "-c", f"echo x >> {starts}; exec sleep 60"])
    assert wait_for(lambda: starts.exists() and len(starts.read_text().split()) == 1)
    for n in range(2, 5):
        if case == "root renamed and made anew":
            renamed_and_made_anew(tmp_path, n)
            # The copy moved away no longer counts; the new folder does.
            (tmp_path / f"src.{n}" / "old.py").write_text("x")
            (tmp_path / "src" / "app.py").write_text(f"{n}\n")
        elif case == "root removed and made anew":
            shutil.rmtree(tmp_path / "src")
            (tmp_path / "src").mkdir()
            (tmp_path / "src" / "app.py").write_text(f"{n}\n")
        elif case == "symlinked file":
            (tmp_path / "data" / "app.conf").write_text(f"{n}\n")
        else:
            configmap(tmp_path, n, f"{n}\n")
        assert wait_for(lambda: len(starts.read_text().split()) >= n), (n, starts.read_text())
        # Settled (past --watch-delay, 100 ms): the next change is a new
        # restart. A change of several steps may make two (>= n above):
        # no event says the second will not come.
        assert_nothing_within(0.3)
    if case == "root renamed and made anew":
        before = len(starts.read_text().split())
        (tmp_path / "src.2" / "late.py").write_text("x")
        # Five times --watch-delay: a restart would have begun.
        assert_nothing_within(0.5, "a restart", lambda: len(starts.read_text().split()) != before)
    p.stop()


def test_watch_bad_input():
    out = run(["--watch=/nonexistent/prebind", "--", "true"])
    assert out.returncode == 125
    assert out.stderr == "prebind: --watch: cannot watch '/nonexistent/prebind': No such file or directory\n", out.stderr
    out = run(["--watch-delay=forever", "--watch=.", "--", "true"])
    assert out.returncode == 125 and out.stderr.count("\n") == 1
    out = run(["--watch-ignore=" + "x" * 300, "--watch=.", "--", "true"])
    assert out.returncode == 125 and "longer than 255" in out.stderr
    out = run(["--exec", "--watch=.", "--", "true"])
    assert out.returncode == 125 and "cannot be combined with --exec" in out.stderr



# ---- every generation alive is signalled and stopped ---------------------------

# A tiny COMMAND for these: it appends its pid to DIR/pids, writes each of
# SIGTERM, SIGINT and SIGQUIT it gets to DIR/PID, and exits once it has
# had all three. It says "ready" on stderr (--ready-log) unless DIR/hang
# exists; if DIR/ignore exists, it ignores all three instead.
# A handler may run inside another (Python checks for signals between
# any two bytecodes): each writes its line in one os.write() first, and
# only the main loop exits, so that no line is lost to a nested exit.
SIGNALLED = r"""
import os, signal, sys, time
d = sys.argv[1]
got = set()
log = os.open(f"{d}/{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def on(sig, frame):
    os.write(log, (signal.Signals(sig).name + "\n").encode())
    got.add(signal.Signals(sig).name)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN if os.path.exists(f"{d}/ignore") else on)
with open(f"{d}/pids", "a") as f:
    f.write(f"{os.getpid()}\n")
if not os.path.exists(f"{d}/hang"):
    print("ready", file=sys.stderr, flush=True)
while not got >= {"SIGTERM", "SIGINT", "SIGQUIT"}:
    time.sleep(0.01)  # not pause(): a signal between the test and it would be waited for again
"""


def start_signalled(start, directory):
    p = start(["-v", "--print", "--reload=overlap", "--ready-log=^ready$", "--", PYTHON, "-c", SIGNALLED,
               str(directory)])
    int(p.readline())
    return p


def generation_pids(directory, n):
    """The pids of the first n generations, once they have started."""
    path = directory / "pids"
    assert wait_for(lambda: path.exists() and len(path.read_text().split()) >= n)
    return [int(x) for x in path.read_text().split()[:n]]


def signals_of(directory, pid):
    try:
        return (directory / str(pid)).read_text().split()
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("moment", ["overlapping", "retiring"])
def test_sigterm_sigint_and_sigquit_reach_every_generation(start, tmp_path, moment):
    """Overlapping: generation 2 waits to be ready (for ever) beside
    generation 1. Retiring: generation 2 is ready, generation 1 was told
    to stop (SIGTERM) and waits for the rest. Either way SIGQUIT, SIGINT
    and SIGTERM sent to prebind reach both, and prebind ends once both
    are gone."""
    p = start_signalled(start, tmp_path)
    if moment == "overlapping":
        (tmp_path / "hang").touch()
    p.send(signal.SIGHUP)
    first, second = generation_pids(tmp_path, 2)
    if moment == "retiring":
        assert wait_for(lambda: signals_of(tmp_path, first) == ["SIGTERM"])
    for sig in (signal.SIGQUIT, signal.SIGINT, signal.SIGTERM):
        p.send(sig)
        assert wait_for(lambda: sig.name in signals_of(tmp_path, second)), (sig, signals_of(tmp_path, second))
    assert p.wait() == 0
    assert {"SIGQUIT", "SIGINT", "SIGTERM"} <= set(signals_of(tmp_path, first)), signals_of(tmp_path, first)
    assert not pid_alive(first) and not pid_alive(second)


def test_a_retiree_that_ignores_sigterm_is_killed_after_the_default_grace(start, tmp_path):
    """No --kill-after: generation 1, told to stop, ignores SIGTERM (and
    SIGINT, SIGQUIT). It is SIGKILLed 10 s after it was told, and prebind,
    whose serving generation has stopped meanwhile, exits then instead of
    waiting for it for ever."""
    (tmp_path / "ignore").touch()
    p = start_signalled(start, tmp_path)
    (tmp_path / "ignore").unlink()
    p.send(signal.SIGHUP)
    first, second = generation_pids(tmp_path, 2)
    t0 = time.monotonic()  # before generation 2 is ready, and so before generation 1 is told to stop
    for sig in (signal.SIGQUIT, signal.SIGINT, signal.SIGTERM):
        p.send(sig)
        assert wait_for(lambda: sig.name in signals_of(tmp_path, second)), (sig, signals_of(tmp_path, second))
    assert p.wait(timeout=TIMEOUT) == 0, "prebind waited for the retiree"
    took = time.monotonic() - t0
    assert not pid_alive(first) and signals_of(tmp_path, first) == []
    assert 9.5 < took < 18, took
    p.close()
    assert "generation 1 (pid %d) still running after its grace, sending SIGKILL" % first in p.err, p.err

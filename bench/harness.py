"""bench/harness.py - what every section of bench/run measures with: the
process harness (every child in its own session, tracked, killed with its
group), the common environment, the tools, the statistics and formatting
helpers, and the measurements more than one section makes.

Standard library only; meant for Debian's /usr/bin/python3."""

import json
import os
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import time


HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

# Every measured command gets the same small environment: Debian's default
# PATH (the caller's may be long, and every tool searches it the same way),
# and absolute paths anyway, so no row pays for a PATH search.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/root"),
       "PYTHONDONTWRITEBYTECODE": "1"}     # no __pycache__ in bench/ from uvicorn's import
PYTHON = "/usr/bin/python3"

# name -> (Debian package, how to find it)
TOOLS = {
    "hyperfine": "hyperfine",
    "tini": "tini",
    "dumb-init": "dumb-init",
    "catatonit": "catatonit",
    "tini-static": "tini",
    "time": "time",            # /usr/bin/time, not the shell keyword
    "unshare": "util-linux",
    "python3-uvicorn": "python3-uvicorn",
    "valgrind": "valgrind",    # profile section only (full run)
    "redis-server": "redis-server",
    "redis-cli": "redis-tools",
    "psql": "postgresql-client-15",
    "pg_isready": "postgresql-client-15",
    "setpriv": "util-linux",
    "callgrind_annotate": "valgrind",
}


class Missing(Exception):
    """A tool a benchmark needs is not installed."""


class BenchError(Exception):
    """A benchmark could not run (not a timing verdict)."""


class Skip(Exception):
    """An optional section that cannot run here (never a failure)."""


# ---------------------------------------------------------------------------
# processes: every child in its own session, tracked, killed with its group

LIVE = set()          # pids of session leaders we started and have not reaped
LOG_FD = None         # stderr of measured commands (a file in the work dir)


def spawn(argv, stdout_fd=None, stdin_null=True, env=None, fd3=None):
    """posix_spawn (vfork-like: the cheapest for the harness) in a new session.
    argv[0] must be absolute; fd3: an fd the child gets as 3.  Returns the
    pid."""
    actions = [] if fd3 is None else [(os.POSIX_SPAWN_DUP2, fd3, 3)]
    if stdin_null:
        actions.append((os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0))
    if stdout_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, stdout_fd, 1))
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0))
    if LOG_FD is not None:
        actions.append((os.POSIX_SPAWN_DUP2, LOG_FD, 2))
    pid = os.posix_spawn(argv[0], argv, env or ENV, file_actions=actions, setsid=True)
    LIVE.add(pid)
    return pid


def has_exited(pid):
    """True once pid is a zombie (not reaped: its pid, and so its group id,
    cannot be reused while we look)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def reap(pid, timeout=5.0, term=False):
    """Bounded stop and reap of a session leader we started: optional SIGTERM,
    wait up to `timeout`, then SIGKILL to its group.  Whatever is left in its
    group is killed while the leader is still a zombie.  Returns the exit
    code (negative: killed by that signal) or None if it could not be reaped."""
    if term:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    killed = False
    delay = 0.0005
    while not has_exited(pid):
        if time.monotonic() > deadline:
            if killed:
                return None
            killpg(pid)
            killed = True
            deadline = time.monotonic() + 5.0
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    killpg(pid)
    _, status = os.waitpid(pid, 0)
    LIVE.discard(pid)
    return os.waitstatus_to_exitcode(status)


def killpg(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_everything():
    for pid in list(LIVE):
        killpg(pid)
    for pid in list(LIVE):
        try:
            deadline = time.monotonic() + 2
            while os.waitpid(pid, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
        except ChildProcessError:
            pass
        LIVE.discard(pid)


def read_first_line(fd, timeout):
    """Read up to the first newline from fd, bounded.  Returns bytes or None."""
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return buf.split(b"\n", 1)[0]


def run(argv, timeout, **kw):
    """subprocess.run with a bound and our environment, output captured."""
    kw.setdefault("env", ENV)
    return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, text=True, **kw)


# ---------------------------------------------------------------------------
# small helpers

def which(name):
    if name == "time":
        return "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
    return shutil.which(name, path=DEFAULT_PATH)


def need(*names):
    out = []
    for n in names:
        if n == "python3-uvicorn":
            r = run([PYTHON, "-c", "import uvicorn"], 30)
            if r.returncode != 0:
                raise Missing("python3-uvicorn (import uvicorn failed with %s)" % PYTHON)
            out.append(PYTHON)
            continue
        p = which(n)
        if not p:
            raise Missing("%s (Debian package %s)" % (n, TOOLS.get(n, n)))
        out.append(p)
    return out if len(out) != 1 else out[0]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def ms(x, digits=2):
    return "n/a" if x is None or x != x else "%.*f" % (digits, x)


def ratio(a, b):
    if a is None or b is None or b == 0 or a != a or b != b:
        return "n/a"
    return "%.2f×" % (a / b)


def proc_kv(path):
    """key: value files of /proc (status, smaps_rollup) -> {key: int kB}."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                parts = v.split()
                if parts and parts[0].isdigit():
                    out[k.strip()] = int(parts[0])
    except OSError:
        pass
    return out


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:       # kernel without CONFIG_PROC_CHILDREN
        pass
    except OSError:
        return []
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def exe_of(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def verdict(ok):
    return "yes" if ok else "**no**"


# ---------------------------------------------------------------------------
# measurements more than one section makes

def hyperfine_rounds(ctx, cmds):
    """hyperfine -N (no shell), warm-up, every command in the same run; six
    rounds, each in a different order (rotated, every other one reversed),
    so that a slow phase of the shared machine does not land on one command
    only.  Returns (times, user, system, runs, warmup, rounds): per command
    name, all run times and the per-round mean user and system times, in ms."""
    hyperfine = need("hyperfine")
    runs, warmup = (5, 1) if ctx.smoke else (100, 10)
    rounds = 1 if ctx.smoke else 6
    times = {name: [] for name, _ in cmds}
    user, system = {name: [] for name, _ in cmds}, {name: [] for name, _ in cmds}
    for rnd in range(rounds):
        order = cmds[rnd % len(cmds):] + cmds[:rnd % len(cmds)]
        if rnd % 2:
            order.reverse()
        out = os.path.join(ctx.work, "hyperfine-%d.json" % rnd)
        argv = [hyperfine, "-N", "--style", "none", "--warmup", str(warmup),
                "--runs", str(runs), "--export-json", out]
        argv += [shlex.join(c) for _, c in order]
        r = run(argv, timeout=60 + len(cmds) * (runs + warmup) * 0.1)
        if r.returncode != 0:
            raise BenchError("hyperfine failed (%d): %s" % (r.returncode, r.stderr.strip()[-400:]))
        with open(out) as f:
            res = json.load(f)["results"]
        by_cmd = {x["command"]: x for x in res}
        for name, c in order:
            x = by_cmd[shlex.join(c)]
            if any(code != 0 for code in x.get("exit_codes", [])):
                raise BenchError("%s exited non-zero under hyperfine" % name)
            times[name] += [t * 1000 for t in x["times"]]
            user[name].append(x["user"] * 1000)
            system[name].append(x["system"] * 1000)
    return times, user, system, runs, warmup, rounds


def supervisor_memory(sups, sleep, nap, reps):
    """(VmHWM, VmRSS, PSS, USS) in kB of each supervising process itself,
    read from /proc while `sleep nap` runs under it, all of them side by
    side, reps times.  sups: [(name, argv prefix)]."""
    got = {name: [] for name, _ in sups}
    for _ in range(reps):
        pids = {name: spawn(argv + [sleep, nap]) for name, argv in sups}
        try:
            deadline = time.monotonic() + 5
            pending = dict(pids)
            while pending and time.monotonic() < deadline:
                for name, pid in list(pending.items()):
                    kids = children_of(pid)
                    if kids and exe_of(kids[0]) == sleep:
                        del pending[name]
                time.sleep(0.005)
            if pending:
                raise BenchError("COMMAND did not start under %s" % ", ".join(pending))
            time.sleep(0.15)     # the supervisors are in their wait loops now
            for name, pid in pids.items():
                st = proc_kv("/proc/%d/status" % pid)
                sm = proc_kv("/proc/%d/smaps_rollup" % pid)
                if "VmHWM" not in st:
                    raise BenchError("cannot read /proc/%d/status of %s" % (pid, name))
                got[name].append((st["VmHWM"], st["VmRSS"], sm.get("Pss", 0),
                                  sm.get("Private_Clean", 0) + sm.get("Private_Dirty", 0)))
        finally:
            for name, pid in pids.items():
                code = reap(pid, 5)
                if code != 0:
                    raise BenchError("%s -- sleep exited %s" % (name, code))
    return got


def peak_rss(cmds, reps):
    """Peak RSS in kB of each command, as `/usr/bin/time -f %M` reports it
    (the largest of the command and the descendants it waited for), the
    commands alternated in a rotating order, reps rounds.  cmds: [(name,
    argv)].  Returns {name: [kB]}."""
    timebin = need("time")
    got = {name: [] for name, _ in cmds}
    for i in range(reps):
        k = i % len(cmds)
        for name, argv in cmds[k:] + cmds[:k]:
            r = run([timebin, "-f", "%M"] + argv, 30)
            last = r.stderr.strip().splitlines()[-1:] or [""]
            if r.returncode != 0 or not last[0].isdigit():
                raise BenchError("/usr/bin/time -f %%M %s failed: %s" % (name, r.stderr[-300:]))
            got[name].append(int(last[0]))
    return got


def shared_objects(path):
    env = dict(ENV, LD_TRACE_LOADED_OBJECTS="1")
    r = run([path], 30, env=env)
    return [l.split()[0] for l in r.stdout.splitlines() if "/" in l and "vdso" not in l]


# The server fixtures (sections ttfr and ready) run under timeout(1), so that
# even a SIGKILLed harness leaves no server behind for more than a minute (the
# same ~1 ms for both ways a fixture starts its server).
BOUND = ["/usr/bin/timeout", "-k", "5", "60"]


def start_fixture(argv, pass_fds=()):
    """A server fixture: argv under BOUND, in its own session, tracked,
    stdin and stdout /dev/null, stderr in the log.  Returns the Popen."""
    p = subprocess.Popen(BOUND + argv, env=ENV, pass_fds=pass_fds, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=LOG_FD)
    LIVE.add(p.pid)
    return p


def start_published(ctx, options, command, timeout):
    """The fixture through prebind: `prebind --port-fd=N OPTIONS -- COMMAND`
    (start_fixture()), then the first line it writes to that pipe, bounded.
    Returns (Popen, line); BenchError if prebind published nothing."""
    r, w = os.pipe()
    try:
        try:
            p = start_fixture([ctx.prebind, "--port-fd=%d" % w] + options + ["--"] + command, pass_fds=[w])
        finally:
            os.close(w)
        line = read_first_line(r, timeout)
    finally:
        os.close(r)
    if not line:
        raise BenchError("prebind published nothing (exit %s)" % p.poll())
    return p, line


def first_line_rounds(ctx, sec, variants, env=None):
    """Time from spawn to the first line on stdout, in one python timer for
    every variant (posix_spawn, a pipe, select), rows interleaved in a
    rotating order after warm-up rounds, within a time budget; each
    process is stopped with SIGTERM afterwards (not timed).  variants:
    [(name, argv(round), check(line, exit code) -> error or None)].
    Returns ({name: [ms]}, warm-up rounds)."""
    n, warm = (3, 1) if ctx.smoke else (150, 10)
    samples = {name: [] for name, _, _ in variants}
    deadline = time.monotonic() + (20 if ctx.smoke else 90)
    for i in range(warm + n):
        if time.monotonic() > deadline:
            sec.notes.append("time budget reached after %d rounds" % max(0, i - warm))
            break
        rot = variants[i % len(variants):] + variants[:i % len(variants)]
        for name, argv, check in rot:
            r, w = os.pipe()
            t0 = time.perf_counter_ns()
            pid = spawn(argv(i), stdout_fd=w, env=env)
            os.close(w)
            line = read_first_line(r, 10)
            t1 = time.perf_counter_ns()
            os.close(r)
            code = reap(pid, 5, term=True)
            error = check(line, code)
            if error:
                raise BenchError("%s: %s (got %r, exit %s)" % (name, error, line, code))
            if i >= warm:
                samples[name].append((t1 - t0) / 1e6)
    return samples, warm

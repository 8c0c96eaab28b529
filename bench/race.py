#!/usr/bin/python3
"""race.py - stress test of the "pick a free port" race, and of prebind's fix.

Mode "pickport" does what many test fixtures do:

    s = socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    start a server process on `port`; poll-connect until it answers

The gap between close() and the server's bind() is the server's start time, and
another worker may be handed the same port in between.  Each server answers
with its own token (a uuid given on its command line); a client that reads
somebody else's token reached another worker's server.

Mode "prebind" starts the same server through `prebind --print=port --`: the
server takes the listening socket as fd 3, the port is read from prebind's
stdout and the client connects at once (no polling: the kernel queues the
connection until the server accepts).  Expected: no failure at all.

--netns re-executes this script inside `unshare --net` (a private network
namespace: only `lo`, brought up here) and narrows
net.ipv4.ip_local_port_range there, so the race becomes frequent without
touching the host's settings.  All traffic is on 127.0.0.1.

Standard library only; meant for Debian's /usr/bin/python3.
Exit status: 0 pass, 1 fail (see --help), 2 usage or setup error.
"""

import argparse
import collections
import errno
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

RANGE_SYSCTL = "/proc/sys/net/ipv4/ip_local_port_range"
DEFAULT_NETNS_RANGE = (40000, 40063)
HERE = os.path.dirname(os.path.abspath(__file__))
PREBIND_CANDIDATES = [os.path.join(os.path.dirname(HERE), "build", "prebind"),
                      os.path.join(os.path.dirname(HERE), "build", "src", "prebind")]

# The server, run as `python3 -I -c SERVER TOKEN WHERE LIFETIME`.
# WHERE is a port number (bind it itself, as a pick-a-port fixture does) or
# "fd3" (socket activation: the listening socket is fd 3, LISTEN_PID/LISTEN_FDS
# must be right).  It answers every request with a tiny HTTP/1.0 response that
# carries its token.  Bounded: it exits after LIFETIME seconds, and when its
# stdin is a pipe, as soon as that pipe reaches EOF (the harness died).
SERVER = r'''
import errno, os, select, socket, stat, sys, time
tok, where, life = sys.argv[1], sys.argv[2], float(sys.argv[3])
if where == "fd3":
    pid, nfds = os.environ.get("LISTEN_PID"), os.environ.get("LISTEN_FDS")
    if pid != str(os.getpid()) or nfds != "1":
        sys.stderr.write("server: bad activation env LISTEN_PID=%r (pid %d) LISTEN_FDS=%r\n" % (pid, os.getpid(), nfds))
        sys.exit(3)
    ls = socket.socket(fileno=3)
else:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        ls.bind(("127.0.0.1", int(where)))
        ls.listen(128)
    except OSError as e:
        sys.stderr.write("server: bind 127.0.0.1:%s: %s\n" % (where, e))
        sys.exit(98 if e.errno == errno.EADDRINUSE else 1)
    os.write(1, b"LISTENING\n")
watch = [ls]
try:
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        watch.append(0)
except OSError:
    pass
body = ("token=%s\n" % tok).encode()
resp = (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n" % len(body)) + body
end = time.monotonic() + life
while True:
    left = end - time.monotonic()
    if left <= 0:
        sys.exit(0)
    r = select.select(watch, [], [], left)[0]
    if 0 in r and not os.read(0, 4096):
        sys.exit(0)
    if ls in r:
        try:
            c = ls.accept()[0]
        except OSError:
            continue
        c.settimeout(5)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf and len(buf) < 65536:
                d = c.recv(4096)
                if not d:
                    break
                buf += d
            c.sendall(resp)
        except OSError:
            pass
        c.close()
'''

TOKEN_RE = re.compile(rb"token=([0-9a-f]{32})")
LINGER_RST = struct.pack("ii", 1, 0)   # close() sends RST: no TIME_WAIT left behind


class SetupError(Exception):
    pass


# --------------------------------------------------------------------------
# process bookkeeping: every child runs in its own session (pgid == pid), is
# registered here, and is stopped by stop_proc() or, at the very end, reap_all()

LIVE = {}
LIVE_LOCK = threading.Lock()
STOP = threading.Event()


def spawn(argv):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True,
                         close_fds=True)
    with LIVE_LOCK:
        LIVE[p.pid] = p
    return p


def exited_nowait(pid):
    """True once pid has exited; the zombie is left in place (WNOWAIT), so the
    pid, and with it the process group id, cannot be reused yet."""
    try:
        r = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return r is not None


def wait_exit(pid, timeout):
    end = time.monotonic() + timeout
    delay = 0.001
    while not exited_nowait(pid):
        if time.monotonic() >= end:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return True


def group_members(pgid, exclude):
    """Pids (other than `exclude`) whose process group is pgid."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == exclude:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(name))
    return found


def drain(fd):
    """Whatever is readable on a pipe right now (the writers are gone)."""
    out = b""
    try:
        os.set_blocking(fd, False)
        while len(out) < 1 << 16:
            d = os.read(fd, 4096)
            if not d:
                break
            out += d
    except OSError:
        pass
    return out


def stop_proc(p, timeout=2.0):
    """SIGTERM to the process itself (prebind forwards it), bounded wait,
    then SIGKILL to its whole group.  Returns (returncode, stray_pids, stderr,
    killed): stray_pids are members of its group still alive after it exited
    on its own or on SIGTERM; killed is True if SIGKILL was needed."""
    killed = False
    if not exited_nowait(p.pid):
        try:
            p.send_signal(signal.SIGTERM)
        except OSError:
            pass
        if not wait_exit(p.pid, timeout):
            killed = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            wait_exit(p.pid, timeout)
    # the leader is a zombie now (or was never ours to wait for): its pid, and
    # so its process group id, cannot be reused yet, so killpg is safe
    stray = [] if killed else group_members(p.pid, p.pid)
    if stray or killed:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        end = time.monotonic() + timeout
        while group_members(p.pid, p.pid) and time.monotonic() < end:
            time.sleep(0.01)
    try:
        p.stdin.close()
    except OSError:
        pass
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
    err = drain(p.stderr.fileno())
    for f in (p.stdout, p.stderr):
        f.close()
    with LIVE_LOCK:
        LIVE.pop(p.pid, None)
    return rc, stray, err, killed


def reap_all():
    with LIVE_LOCK:
        procs = list(LIVE.values())
        LIVE.clear()
    for p in procs:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass
            if wait_exit(p.pid, 1.0):
                break
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            p.wait(2)
        except subprocess.TimeoutExpired:
            pass
    return len(procs)


def read_line(p, buf, deadline):
    """Read p.stdout up to the first newline, bounded.  Returns the line
    (without newline), b"" if the pipe reached EOF first, None on timeout."""
    fd = p.stdout.fileno()
    while b"\n" not in buf[0]:
        left = deadline - time.monotonic()
        if left <= 0:
            return None

        r = select.select([fd], [], [], left)[0]
        if not r:
            continue
        d = os.read(fd, 4096)
        if not d:
            return b""
        buf[0] += d
    line, buf[0] = buf[0].split(b"\n", 1)
    return line


# --------------------------------------------------------------------------
# the client side

def exchange(port, deadline):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
        s.settimeout(max(0.001, deadline - time.monotonic()))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        while len(data) < 65536:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            d = s.recv(4096)
            if not d:
                break
            data += d
        return data
    finally:
        s.close()


def errname(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__


def pick_port(reuseaddr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if reuseaddr:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


# --------------------------------------------------------------------------
# statistics

class Stats:
    def __init__(self, mode, workers, starts_per_worker):
        self.mode = mode
        self.workers = workers
        self.planned = workers * starts_per_worker
        self.lock = threading.Lock()
        self.starts = self.ok = self.eaddrinuse = self.wrong_server = 0
        self.other_errors = self.failed_starts = 0
        self.retried_resets = 0   # pickport: connections reset, retried (not a failure)
        self.kinds = collections.Counter()
        self.exit_status = collections.Counter()
        self.examples = []
        self.ports = set()
        self.gaps = []        # pickport: picker close() -> server reported LISTENING
        self.latency = []     # spawn -> verified answer
        self.seconds = 0.0
        self.stopped_early = False

    def record(self, r):
        with self.lock:
            self.starts += 1
            if r.get("port"):
                self.ports.add(r["port"])
            self.eaddrinuse += r["eaddrinuse"]
            self.wrong_server += r["wrong_server"]
            self.other_errors += len(r["errors"])
            for k in r["errors"]:
                self.kinds[k] += 1
            if r.get("rc") is not None:
                self.exit_status[str(r["rc"])] += 1
            failed = r["eaddrinuse"] or r["wrong_server"] or r["errors"]
            if failed:
                self.failed_starts += 1
                if len(self.examples) < 12:
                    self.examples.append(r["note"])
            else:
                self.ok += 1
            self.retried_resets += r.get("retried", 0)
            if r.get("gap") is not None:
                self.gaps.append(r["gap"])
            if r.get("latency") is not None and not failed:
                self.latency.append(r["latency"])

    def as_dict(self):
        def q(xs, f):
            if not xs:
                return None
            xs = sorted(xs)
            return round(1000 * xs[min(len(xs) - 1, int(f * len(xs)))], 1)
        return {
            "mode": self.mode, "workers": self.workers,
            "planned_starts": self.planned, "starts": self.starts,
            "ok": self.ok, "eaddrinuse": self.eaddrinuse,
            "wrong_server": self.wrong_server,
            "other_errors": self.other_errors,
            "failed_starts": self.failed_starts,
            "retried_resets": self.retried_resets,
            "seconds": round(self.seconds, 2),
            "stopped_early": self.stopped_early,
            "error_kinds": dict(self.kinds),
            "exit_status": dict(self.exit_status),
            "distinct_ports": len(self.ports),
            "gap_ms_median": q(self.gaps, 0.5), "gap_ms_p95": q(self.gaps, 0.95),
            "answer_ms_median": q(self.latency, 0.5),
            "answer_ms_p95": q(self.latency, 0.95),
            "examples": self.examples,
        }


TOKENS = {}          # token -> "w<worker>#<n>" (who owns which server)
TOKENS_LOCK = threading.Lock()


def whose(token):
    with TOKENS_LOCK:
        return TOKENS.get(token, "unknown server")


def classify_answer(r, data, token):
    m = TOKEN_RE.search(data or b"")
    if m is None:
        r["errors"].append("bad_answer" if data else "empty_answer")
        r["note"] += " bad answer %r;" % (data[:60],)
        return False
    got = m.group(1).decode()
    if got != token:
        r["wrong_server"] = 1
        r["note"] += " answered by %s;" % whose(got)
        return False
    return True


# --------------------------------------------------------------------------
# one start, each mode

def start_pickport(cfg, wid, n):
    token = uuid.uuid4().hex
    me = "w%d#%d" % (wid, n)
    r = {"eaddrinuse": 0, "wrong_server": 0, "errors": [], "note": "pickport %s:" % me}
    try:
        port = pick_port(cfg.pick_reuseaddr)
    except OSError as e:
        r["errors"].append("pick:" + errno.errorcode.get(e.errno, str(e.errno)))
        r["note"] += " bind(0) failed: %s;" % e
        return r
    closed = time.monotonic()
    r["port"] = port
    r["note"] = "pickport %s port %d:" % (me, port)
    with TOKENS_LOCK:
        TOKENS[token] = "%s (port %d)" % (me, port)
    p = spawn([cfg.python, "-I", "-c", SERVER, token, str(port), str(cfg.lifetime)])
    t0 = time.monotonic()
    deadline = t0 + cfg.timeout
    out = [b""]
    line = None
    try:
        # a typical fixture: poll until something answers or the server died
        while not STOP.is_set():
            if exited_nowait(p.pid):
                break
            try:
                data = exchange(port, deadline)
            except ConnectionError as e:
                # refused: not up yet.  reset/aborted: reached a listener that
                # closed without answering; a fixture's wait loop retries both
                if not isinstance(e, ConnectionRefusedError):
                    r["retried"] = r.get("retried", 0) + 1
                if time.monotonic() >= deadline:
                    r["errors"].append("timeout:connect")
                    r["note"] += " nothing answered in %.1fs;" % cfg.timeout
                    break
                time.sleep(cfg.poll_interval)
                continue
            except OSError as e:
                r["errors"].append("client:" + errname(e))
                r["note"] += " client: %s;" % e
                break
            if classify_answer(r, data, token):
                r["latency"] = time.monotonic() - t0
            break
        # did our own server get the port?
        line = read_line(p, out, time.monotonic() + cfg.timeout)
        if line == b"LISTENING":
            r["gap"] = time.monotonic() - closed
        elif line is None:
            r["errors"].append("timeout:server")
            r["note"] += " server neither listened nor exited;"
        else:
            wait_exit(p.pid, cfg.timeout)
        if line == b"LISTENING" and cfg.hold:
            STOP.wait(cfg.hold)           # the "test" runs against its server
    finally:
        rc, stray, err, killed = stop_proc(p)
    if line != b"LISTENING":
        if rc == 98:
            r["eaddrinuse"] = 1
            r["note"] += " server: EADDRINUSE;"
        elif line is not None:
            r["errors"].append("server_exit:%s" % rc)
            r["note"] += " server exited %s: %s;" % (rc, err.decode(errors="replace").strip()[-200:])
    if killed:
        r["errors"].append("stop:sigkill")
        r["note"] += " still running 2s after SIGTERM, killed;"
    if stray:
        r["errors"].append("stray_process")
        r["note"] += " stray pids %s;" % stray
    return r


def start_prebind(cfg, wid, n):
    token = uuid.uuid4().hex
    me = "w%d#%d" % (wid, n)
    r = {"eaddrinuse": 0, "wrong_server": 0, "errors": [], "note": "prebind %s:" % me}
    argv = [cfg.prebind, "--print=port", "--",
            cfg.python, "-I", "-c", SERVER, token, "fd3", str(cfg.lifetime)]
    try:
        p = spawn(argv)
    except OSError as e:
        r["errors"].append("spawn:" + type(e).__name__)
        r["note"] += " cannot run prebind: %s;" % e
        return r
    t0 = time.monotonic()
    deadline = t0 + cfg.timeout
    out = [b""]
    port = None
    try:
        line = read_line(p, out, deadline)
        if line is None:
            r["errors"].append("timeout:publish")
            r["note"] += " no port on stdout in %.1fs;" % cfg.timeout
        elif line == b"":
            r["errors"].append("prebind_exit")
        elif not line.isdigit() or not 0 < int(line) < 65536:
            r["errors"].append("bad_publish")
            r["note"] += " first stdout line %r;" % line[:60]
        else:
            port = int(line)
            r["port"] = port
            r["note"] = "prebind %s port %d:" % (me, port)
            with TOKENS_LOCK:
                TOKENS[token] = "%s (port %d)" % (me, port)
            # no polling: the socket already listens, the kernel queues us
            try:
                data = exchange(port, deadline)
                if classify_answer(r, data, token):
                    r["latency"] = time.monotonic() - t0
                    if cfg.hold:
                        STOP.wait(cfg.hold)
            except OSError as e:
                r["errors"].append("client:" + errname(e))
                r["note"] += " client: %s;" % e
    finally:
        rc, stray, err, killed = stop_proc(p)
    r["rc"] = rc
    if "prebind_exit" in r["errors"]:
        msg = err.decode(errors="replace").strip()[-200:]
        if "in use" in msg:
            # prebind binds port 0: "in use" means the range is exhausted
            # (every candidate port held), the same as pick:EADDRINUSE
            r["errors"].remove("prebind_exit")
            r["errors"].append("pick:EADDRINUSE")
        r["note"] += " prebind exited %s before publishing: %s;" % (rc, msg)
    elif err.strip() and (r["errors"] or r["wrong_server"]):
        r["note"] += " exit %s, stderr: %s;" % (rc, err.decode(errors="replace").strip()[-200:])
    if killed:
        r["errors"].append("stop:sigkill")
        r["note"] += " prebind still running 2s after SIGTERM, killed;"
    if stray:
        r["errors"].append("stray_process")
        r["note"] += " stray pids %s after prebind exited;" % stray
    return r


# --------------------------------------------------------------------------

def run_mode(cfg, mode, deadline):
    st = Stats(mode, cfg.workers, cfg.starts)
    fn = start_pickport if mode == "pickport" else start_prebind
    t0 = time.monotonic()

    def worker(wid):
        for n in range(cfg.starts):
            if STOP.is_set() or time.monotonic() >= deadline:
                st.stopped_early = True
                return
            try:
                st.record(fn(cfg, wid, n))
            except Exception as e:       # a harness bug must not hang the run
                st.record({"eaddrinuse": 0, "wrong_server": 0,
                           "errors": ["harness:" + type(e).__name__],
                           "note": "%s w%d#%d: harness error %r" % (mode, wid, n, e)})

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(cfg.workers)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    st.seconds = time.monotonic() - t0
    if STOP.is_set():
        st.stopped_early = True
    return st


def print_table(results, header):
    for h in header:
        print("# " + h)
    cols = ["mode", "starts", "eaddrinuse", "wrong_server", "other_errors",
            "failed", "seconds"]
    print("%-9s %7s %10s %12s %12s %7s %8s" % tuple(cols))
    for s in results:
        d = s.as_dict()
        print("%-9s %7d %10d %12d %12d %7d %8.1f%s" % (
            d["mode"], d["starts"], d["eaddrinuse"], d["wrong_server"],
            d["other_errors"], d["failed_starts"], d["seconds"],
            "  (stopped early: %d of %d)" % (d["starts"], d["planned_starts"])
            if d["stopped_early"] else ""))
    for s in results:
        d = s.as_dict()
        extra = ["ports used %d" % d["distinct_ports"]]
        if d["gap_ms_median"] is not None:
            extra.append("close->listen gap median %.0f ms (p95 %.0f)" % (
                d["gap_ms_median"], d["gap_ms_p95"]))
        if d["answer_ms_median"] is not None:
            extra.append("start->answer median %.0f ms (p95 %.0f)" % (
                d["answer_ms_median"], d["answer_ms_p95"]))
        if d["retried_resets"]:
            extra.append("connections reset and retried %d" % d["retried_resets"])
        if d["error_kinds"]:
            extra.append("other: " + ", ".join(
                "%s=%d" % kv for kv in sorted(d["error_kinds"].items())))
        if d["mode"] == "prebind" and d["exit_status"]:
            extra.append("prebind exit status: " + ", ".join(
                "%s x%d" % kv for kv in sorted(d["exit_status"].items())))
        print("# %s: %s" % (d["mode"], "; ".join(extra)))
        for e in d["examples"][:5]:
            print("#   e.g. " + e)


# --------------------------------------------------------------------------
# network namespace

def netns_inode():
    return os.stat("/proc/self/ns/net").st_ino


def reexec_in_netns(argv):
    if os.geteuid() == 0:
        base = ["unshare", "--net"]
    else:
        base = ["unshare", "--net", "--map-root-user"]
    try:
        subprocess.run(base + ["--", "true"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=10, check=True)
    except FileNotFoundError:
        raise SetupError("--netns needs unshare(1) (util-linux)")
    except subprocess.CalledProcessError as e:
        raise SetupError("--netns: %s failed: %s" % (
            " ".join(base), e.stderr.decode(errors="replace").strip()))
    except subprocess.TimeoutExpired:
        raise SetupError("--netns: unshare timed out")
    except OSError as e:
        raise SetupError("--netns: cannot run unshare: %s" % e)
    script = os.path.abspath(__file__)
    cmd = base + ["--", sys.executable, script,
                  "--in-netns=%d" % netns_inode()] + argv
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(cmd[0], cmd)


def lo_up():
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10,
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
        return
    except (OSError, subprocess.SubprocessError):
        pass
    import fcntl   # no iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS |= IFF_UP
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifr)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
    finally:
        s.close()


def setup_netns(outer_inode, port_range):
    if netns_inode() == outer_inode:
        raise SetupError("not in a private network namespace; refusing to "
                         "change net.ipv4.ip_local_port_range")
    lo_up()
    lo, hi = port_range
    try:
        fd = os.open(RANGE_SYSCTL, os.O_WRONLY)
        try:
            os.write(fd, b"%d %d\n" % (lo, hi))
        finally:
            os.close(fd)
    except OSError as e:
        raise SetupError("kernel refused ip_local_port_range %d-%d: %s "
                         "(it wants %s <= LO <= HI <= 65535)" % (
                             lo, hi, e, read_sysctl("ip_unprivileged_port_start")))
    got = current_range()
    if got != (lo, hi):
        raise SetupError("ip_local_port_range reads back %r, wanted %r" % (got, (lo, hi)))
    # lo must carry a connection now; clients take their ports from the same
    # narrow range (the other parity), so a range can be too small for them
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        c = socket.socket()
        try:
            c.settimeout(5)
            c.connect(s.getsockname())
        except OSError as e:
            raise SetupError("no connection possible on lo with ip_local_port_range "
                             "%d-%d (%s); a wider range leaves ports for the clients"
                             % (lo, hi, e))
        finally:
            c.close()
    finally:
        s.close()


def read_sysctl(name):
    try:
        with open("/proc/sys/net/ipv4/" + name) as f:
            return f.read().strip()
    except OSError:
        return "?"


def current_range():
    with open(RANGE_SYSCTL) as f:
        a, b = f.read().split()
    return int(a), int(b)


def bind0_ports(lo, hi, reuseaddr):
    """Which ports bind(127.0.0.1:0) searches first (see FIELD-NOTES: the
    parity opposite to connect(), only the lower half with SO_REUSEADDR)."""
    end = hi + 1                        # the kernel works on [lo, hi + 1)
    if reuseaddr:
        end = lo + (end - lo) // 2
    if end - lo <= 1:
        return 1
    return len(range(lo + 1, end, 2))


# --------------------------------------------------------------------------

def parse_range(text):
    m = re.fullmatch(r"\s*(\d+)\s*[-: ]\s*(\d+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError("expected LO-HI, e.g. 40000-40063")
    lo, hi = int(m.group(1)), int(m.group(2))
    if not 1024 <= lo <= hi <= 65535:
        raise argparse.ArgumentTypeError("need 1024 <= LO <= HI <= 65535")
    return lo, hi


def positive(kind):
    def conv(text):
        v = kind(text)
        if v <= 0:
            raise argparse.ArgumentTypeError("must be > 0")
        return v
    return conv


def build_parser():
    ap = argparse.ArgumentParser(
        prog="race.py",
        description="Stress test of the pick-a-free-port race (mode pickport) "
                    "and of prebind, which removes it (mode prebind).",
        epilog="Exit status: 0 if the prebind mode (when selected) ran and had no failure (and, "
               "with --expect-pickport-failures, the pickport mode had at least "
               "one); 1 otherwise; 2 on usage or setup errors.  Quick CI run: "
               "race.py --netns --workers 8 --starts 40 --expect-pickport-failures")
    ap.add_argument("--mode", choices=["pickport", "prebind", "both"], default="both")
    ap.add_argument("--workers", type=positive(int), default=8,
                    help="parallel workers (default 8)")
    ap.add_argument("--starts", type=positive(int), default=40,
                    help="server starts per worker and mode (default 40)")
    ap.add_argument("--netns", action="store_true",
                    help="run inside a private network namespace (unshare -n) "
                         "with a narrow ephemeral port range")
    ap.add_argument("--port-range", type=parse_range, metavar="LO-HI",
                    help="ip_local_port_range inside the namespace (needs --netns; "
                         "default %d-%d)" % DEFAULT_NETNS_RANGE)
    ap.add_argument("--prebind", default=None, metavar="PATH",
                    help="prebind binary (default: ../build/prebind or "
                         "../build/src/prebind next to this script, else "
                         "prebind on PATH)")
    ap.add_argument("--max-seconds", type=positive(float), default=45.0, metavar="T",
                    help="overall budget; workers stop starting new servers after "
                         "it (with --mode both, pickport gets the first half). "
                         "Default 45")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--expect-pickport-failures", action="store_true",
                    help="also fail unless the pickport mode failed at least once")
    ap.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                    help="keep each server up this long after its answer, as a "
                         "test would (default 0)")
    ap.add_argument("--timeout", type=positive(float), default=5.0,
                    help="bound for each wait inside one start (default 5 s)")
    ap.add_argument("--poll-interval", type=positive(float), default=0.01,
                    help="pickport: sleep between connection attempts (default 0.01 s)")
    ap.add_argument("--pick-reuseaddr", action="store_true",
                    help="pickport: set SO_REUSEADDR on the picking socket (the "
                         "kernel then searches only half of the candidates)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for the test server (default: this one)")
    ap.add_argument("--in-netns", type=int, default=None, help=argparse.SUPPRESS)
    return ap


def resolve_prebind(path):
    if path is None:
        import shutil
        found = [c for c in PREBIND_CANDIDATES if os.access(c, os.X_OK)]
        path = (found or [shutil.which("prebind") or PREBIND_CANDIDATES[0]])[0]
    path = os.path.abspath(path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SetupError("prebind binary not found or not executable: %s "
                         "(build it, or pass --prebind PATH, or --mode pickport)" % path)
    return path


def main(argv):
    ap = build_parser()
    cfg = ap.parse_args(argv)
    if cfg.port_range and not cfg.netns:
        ap.error("--port-range needs --netns (the host's settings are never changed)")
    try:
        if cfg.mode != "pickport":
            cfg.prebind = resolve_prebind(cfg.prebind)
        if cfg.netns and cfg.in_netns is None:
            reexec_in_netns(argv)        # does not return
        header = []
        if cfg.in_netns is not None:
            setup_netns(cfg.in_netns, cfg.port_range or DEFAULT_NETNS_RANGE)
            lo, hi = current_range()
            header.append("private netns, lo up, ip_local_port_range %d-%d: bind(0) "
                          "searches %d ports first (%d with SO_REUSEADDR, as prebind sets it)" % (
                          lo, hi, bind0_ports(lo, hi, False), bind0_ports(lo, hi, True)))
        else:
            lo, hi = current_range()
            header.append("host netns, ip_local_port_range %d-%d (untouched)" % (lo, hi))
    except SetupError as e:
        print("race.py: %s" % e, file=sys.stderr)
        return 2

    if not 0 <= cfg.hold <= 600:
        ap.error("--hold must be between 0 and 600")
    cfg.lifetime = 3 * cfg.timeout + cfg.hold + 10
    snapshot_dir = None
    if cfg.mode != "pickport":
        # run a private copy: a rebuild during a long run must not break it
        import shutil
        import tempfile
        snapshot_dir = tempfile.mkdtemp(prefix="race-prebind-")
        copy = os.path.join(snapshot_dir, "prebind")
        shutil.copy2(cfg.prebind, copy)
        header_prebind = cfg.prebind
        cfg.prebind = copy
    header.append("workers %d, starts %d per worker, hold %gs, timeout %gs, python %s%s" % (
        cfg.workers, cfg.starts, cfg.hold, cfg.timeout, cfg.python,
        ", prebind %s (run from a copy)" % header_prebind
        if cfg.mode != "pickport" else ""))

    def on_signal(signum, frame):
        if STOP.is_set():
            reap_all()
            os._exit(128 + signum)
        STOP.set()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    modes = ["pickport", "prebind"] if cfg.mode == "both" else [cfg.mode]
    t0 = time.monotonic()
    results = []
    try:
        for i, mode in enumerate(modes):
            share = (i + 1) / len(modes)
            results.append(run_mode(cfg, mode, t0 + cfg.max_seconds * share))
            if STOP.is_set():
                break
    finally:
        leftovers = reap_all()
        if snapshot_dir:
            import shutil
            shutil.rmtree(snapshot_dir, ignore_errors=True)

    by = {s.mode: s for s in results}
    status = 0
    reasons = []
    if STOP.is_set():
        status = 1
        reasons.append("interrupted")
    if "prebind" in modes:
        pb = by.get("prebind")
        if pb is None or pb.starts == 0:
            status = 1
            reasons.append("prebind mode did not run")
        elif pb.failed_starts:
            status = 1
            reasons.append("prebind mode had %d failed starts" % pb.failed_starts)
    if cfg.expect_pickport_failures:
        pp = by.get("pickport")
        if pp is None or pp.failed_starts == 0:
            status = 1
            reasons.append("pickport mode had no failure (expected some)")
    if leftovers:
        reasons.append("%d processes still registered at exit (killed)" % leftovers)

    if cfg.json:
        print(json.dumps({"header": header, "results": [s.as_dict() for s in results],
                          "exit_status": status, "reasons": reasons}, indent=1))
    else:
        print_table(results, header)
        print("# result: %s%s" % ("PASS" if status == 0 else "FAIL",
                                  " (" + "; ".join(reasons) + ")" if reasons else ""))
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""4. Scale: concurrent instances."""

import os
import signal
import socket
import time

from harness import (BenchError, LIVE, spawn, has_exited, reap, killpg, read_first_line, median, pct, ms,
                     verdict, proc_kv)


# Scale parameters (brief: 1000 instances, batches).
SCALE_BATCH = 50


def count_processes():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def cgroup_pids_room():
    """Free pids in our cgroup (v2 or v1 pids controller), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        base = "/sys/fs/cgroup" if ctrl == "" else ("/sys/fs/cgroup/pids" if "pids" in ctrl.split(",") else None)
        if base is None:
            continue
        d = base + path
        try:
            with open(d + "/pids.max") as f:
                mx = f.read().strip()
            with open(d + "/pids.current") as f:
                cur = int(f.read())
        except (OSError, ValueError):
            continue
        if mx != "max":
            return int(mx) - cur
    return None


def scale_limits(want):
    """How many instances this machine allows (each = prebind + sleep, one
    pipe while starting, one listening port); notes on what limited it."""
    import resource
    notes = []
    n = want
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need_fds = 2 * SCALE_BATCH + 64
    if soft != resource.RLIM_INFINITY and soft < need_fds:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096, hard))
        except (ValueError, OSError):
            raise BenchError("ulimit -n %d is too low for batches of %d" % (soft, SCALE_BATCH))
    notes.append("ulimit -n %s" % soft)
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    with open("/proc/sys/kernel/threads-max") as f:
        threads_max = int(f.read())
    used = count_processes()
    room = min(pid_max, threads_max) - used - 200
    nproc_soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if nproc_soft != resource.RLIM_INFINITY and os.geteuid() != 0:
        room = min(room, nproc_soft - used - 200)
    notes.append("ulimit -u %s, pid_max %d, threads-max %d, %d processes running"
                 % ("unlimited" if nproc_soft == resource.RLIM_INFINITY else nproc_soft,
                    pid_max, threads_max, used))
    cg = cgroup_pids_room()
    if cg is not None:
        room = min(room, cg - 200)
        notes.append("cgroup pids: %d free" % cg)
    if room // 2 < n:
        notes.append("**scaled down** from %d to %d instances: only %d pids free" % (n, max(0, room // 2), room))
        n = max(0, room // 2)
    avail = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    if avail and avail // 4096 < n:        # be generous: 4 MB per prebind+sleep pair
        notes.append("**scaled down** from %d to %d instances: MemAvailable %d MB" % (n, avail // 4096, avail // 1024))
        n = avail // 4096
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    ports = (hi - lo + 1) // 2          # bind(0) uses one parity of the range
    notes.append("ip_local_port_range %d-%d (~%d ports for bind(0))" % (lo, hi, ports))
    if ports - 500 < n:
        notes.append("**scaled down** to %d: the ephemeral range is small" % max(0, ports - 500))
        n = max(0, ports - 500)
    return n, notes


def bench(ctx, sec):
    """N concurrent `prebind --print=port --die-with-parent -- sleep 30`,
    started in batches of 50 (spawn the batch, then read each one's port):
    all ports distinct, every socket accepts a connection (the kernel queues
    it: sleep never accepts), summed RSS/PSS of the prebind processes, time to
    start them all; then SIGTERM to each, bounded, SIGKILL to what is left."""
    want = 10 if ctx.smoke else 1000
    n, notes = scale_limits(want)
    sec.notes += notes
    if n < 1:
        raise BenchError("the machine allows no instance (%s)" % "; ".join(notes))
    pb, sleep = ctx.prebind, "/usr/bin/sleep"
    life = "30"
    argv = [pb, "--print=port", "--die-with-parent", "--", sleep, life]
    inst = []       # (pid, port)
    lat = []
    errors = []
    mem_before = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    t_start = time.perf_counter()
    deadline = time.monotonic() + (20 if ctx.smoke else 25)    # within sleep's 30 s
    try:
        while len(inst) + len(errors) < n:
            if time.monotonic() > deadline:
                errors.append("start budget spent after %d instances" % len(inst))
                break
            batch = []
            for _ in range(min(SCALE_BATCH, n - len(inst) - len(errors))):
                r, w = os.pipe()
                t0 = time.perf_counter()
                pid = spawn(argv, stdout_fd=w)
                os.close(w)
                batch.append((pid, r, t0))
            for pid, r, t0 in batch:
                line = read_first_line(r, max(1.0, deadline - time.monotonic()))
                t1 = time.perf_counter()
                os.close(r)
                if line is None or not line.strip().isdigit():
                    errors.append("pid %d published %r" % (pid, line))
                    continue
                inst.append((pid, int(line)))
                lat.append((t1 - t0) * 1000)
        t_all = time.perf_counter() - t_start
        ports = [p for _, p in inst]
        distinct = len(set(ports))
        # Every published port listens: connect to each (queued in the backlog).
        refused = 0
        for p in ports:
            c = socket.socket()
            c.settimeout(2)
            try:
                c.connect(("127.0.0.1", p))
            except OSError:
                refused += 1
            finally:
                c.close()
        rss = pss = uss = 0
        alive = 0
        for pid, _ in inst:
            st = proc_kv("/proc/%d/status" % pid)
            sm = proc_kv("/proc/%d/smaps_rollup" % pid)
            if st:
                alive += 1
            rss += st.get("VmRSS", 0)
            pss += sm.get("Pss", 0)
            uss += sm.get("Private_Clean", 0) + sm.get("Private_Dirty", 0)
        mem_after = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    finally:
        # Stop: SIGTERM to every prebind (forwarded to its sleep), bounded.
        t_stop0 = time.perf_counter()
        for pid, _ in inst:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        pending = {pid for pid, _ in inst}
        codes = {}
        stop_deadline = time.monotonic() + 15
        while pending and time.monotonic() < stop_deadline:
            for pid in list(pending):
                if has_exited(pid):
                    killpg(pid)               # leftovers of its group, while the leader is a zombie
                    _, status = os.waitpid(pid, 0)
                    LIVE.discard(pid)
                    codes[pid] = os.waitstatus_to_exitcode(status)
                    pending.discard(pid)
            time.sleep(0.01)
        forced = len(pending)
        for pid in list(pending):
            reap(pid, 5)
        for pid in list(LIVE):     # instances whose port never came
            reap(pid, 2, term=True)
        t_stop = time.perf_counter() - t_stop0
    bad_exit = sum(1 for c in codes.values() if c != 143)
    strays = stray_processes({pid for pid, _ in inst})
    k = len(inst)
    sec.table(["instances", "ports distinct", "listening", "time to start all s", "per instance ms (median / p90)",
               "Σ RSS MB", "Σ PSS MB", "Σ USS MB", "PSS per instance kB", "stop all s"],
              [[k, "%d / %d" % (distinct, k), "%d / %d" % (k - refused, k), "%.2f" % t_all,
                "%s / %s" % (ms(median(lat), 1), ms(pct(lat, 90), 1)),
                "%.1f" % (rss / 1024), "%.1f" % (pss / 1024), "%.1f" % (uss / 1024),
                "%d" % (pss / max(1, alive)), "%.2f" % t_stop]])
    sec.notes.append("`prebind --print=port --die-with-parent -- sleep %s` × %d, batches of %d, "
                     "posix_spawn from one python process; the sums are over the prebind processes "
                     "only (their sleep children not counted)." % (life, k, SCALE_BATCH))
    if mem_before and mem_after:
        sec.notes.append("MemAvailable before minus while running: %.1f MB (prebind + sleep + sockets; "
                         "the whole machine, so noisy)" % ((mem_before - mem_after) / 1024))
    sec.notes.append("Stop: SIGTERM to each prebind; %d exited 143, %d other, %d needed SIGKILL; "
                     "stray processes afterwards: %d." % (len(codes) - bad_exit, bad_exit, forced, strays))
    failures = errors + (["%d duplicate ports" % (k - distinct)] if distinct != k else []) \
        + (["%d ports refused a connection" % refused] if refused else []) \
        + (["%d instances did not exit 143 on SIGTERM" % bad_exit] if bad_exit else []) \
        + (["%d stray processes" % strays] if strays else [])
    if k < n or failures:
        sec.status, sec.reason = "failed", "; ".join(failures[:5]) or "only %d of %d started" % (k, n)
    ctx.results["scale"] = dict(n=k, t_all=t_all, pss=pss)
    sec.summary.append(["%d concurrent instances" % k, "%.2f s to start, %.1f MB Σ PSS" % (t_all, pss / 1024),
                        "—", "—", "ports distinct", verdict(distinct == k and k == n)])


def stray_processes(sessions):
    """Processes still in one of these sessions (ours: started with setsid)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) in sessions:     # field 6: session
                n += 1
        except (OSError, IndexError, ValueError):
            pass
    return n

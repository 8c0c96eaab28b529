"""4. Scale: concurrent instances."""

import os
import signal
import socket
import time

from harness import (BenchError, ENV, LIVE, spawn, has_exited, reap, killpg, read_first_line, median, pct, ms,
                     ratio, verdict, proc_kv, which)


# Scale parameters: 10,000 instances, started in batches.
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


PIDS_PER_INSTANCE = 3      # prebind, its guard, sleep


def raise_limits(n, notes, undo):
    """What n instances need, raised for this benchmark only (restored by
    undo, a list of callables): the harness's RLIMIT_NOFILE, and
    kernel.pid_max when the pids left are too few (root only)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need_fds = 2 * SCALE_BATCH + 256
    if soft != resource.RLIM_INFINITY and soft < need_fds:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need_fds), hard))
            undo.append(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
        except (ValueError, OSError):
            raise BenchError("ulimit -n %d is too low for batches of %d" % (soft, SCALE_BATCH))
    notes.append("ulimit -n %s (the harness needs %d)" % (soft, need_fds))
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    # Room for the machine's other users too: pids are handed out in turn,
    # and fork() says EAGAIN well before every number is taken.
    want = max(65536, 2 * (PIDS_PER_INSTANCE * n + count_processes()))
    if pid_max < want and os.geteuid() == 0:
        try:
            with open("/proc/sys/kernel/pid_max", "w") as f:
                f.write("%d\n" % min(want, 4194304))

            def restore():
                with open("/proc/sys/kernel/pid_max", "w") as f:
                    f.write("%d\n" % pid_max)
            undo.append(restore)
            notes.append("kernel.pid_max raised from %d to %d for this benchmark, restored after"
                         % (pid_max, min(want, 4194304)))
        except OSError as e:
            notes.append("kernel.pid_max %d could not be raised (%s)" % (pid_max, e.strerror))


def scale_limits(want):
    """How many instances this machine allows (each = prebind, its guard and
    sleep, one pipe while starting, one listening port); notes on what
    limited it."""
    import resource
    notes = []
    n = want
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
    if room // PIDS_PER_INSTANCE < n:
        notes.append("**scaled down** from %d to %d instances: only %d pids free"
                     % (n, max(0, room // PIDS_PER_INSTANCE), room))
        n = max(0, room // PIDS_PER_INSTANCE)
    avail = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    if avail and avail // 1024 < n:        # be generous: 1 MB per instance (3 processes)
        notes.append("**scaled down** from %d to %d instances: MemAvailable %d MB" % (n, avail // 1024, avail // 1024))
        n = avail // 1024
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    ports = (hi - lo + 1) // 2          # bind(0) uses one parity of the range
    notes.append("ip_local_port_range %d-%d (~%d ports for bind(0))" % (lo, hi, ports))
    if ports - 500 < n:
        notes.append("**scaled down** to %d: the ephemeral range is small" % max(0, ports - 500))
        n = max(0, ports - 500)
    return n, notes


def marked(token):
    """Pids of the live processes whose environment has the marker (prebind
    passes its environment on to its guard and to COMMAND)."""
    needle = ("PREBIND_BENCH_SCALE=%s" % token).encode()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def private_kb(pid):
    sm = proc_kv("/proc/%d/smaps_rollup" % pid)
    return sm.get("Private_Clean", 0) + sm.get("Private_Dirty", 0), sm.get("Pss", 0)


def tini_private(ctx, k):
    """Private memory (USS) per `tini -s -- sleep` with k of them running."""
    tini = which("tini")
    if not tini:
        return None
    pids = []
    try:
        for _ in range(k):
            pids.append(spawn([tini, "-s", "--", "/usr/bin/sleep", "30"]))
        deadline = time.monotonic() + 10
        # Running once each has its child: the sleep's own pid in /proc/PID/task/PID/children.
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                        if f.read().strip():
                            break
                except OSError:
                    break
                time.sleep(0.005)
        return median([private_kb(pid)[0] for pid in pids])
    finally:
        for pid in pids:
            reap(pid, 5, term=True)


def bench(ctx, sec):
    """N concurrent `prebind -q --port-fd=3 -- sleep 120` (10,000; 10 with
    --smoke), started in batches of 50 (spawn the batch, then read each
    one's port), stopping at the first instance that fails: all ports
    distinct, every socket accepts a connection (the kernel queues it:
    sleep never accepts), the private memory and PSS of each instance's
    prebind and guard (found by a marker in their environment), time to
    start them all; then SIGTERM to each prebind, bounded, SIGKILL to what
    is left, and a check that no process of the run is left."""
    want = 10 if ctx.smoke else 10000
    undo = []
    try:
        raise_limits(want, sec.notes, undo)
        run_instances(ctx, sec, want)
    finally:
        for f in reversed(undo):
            try:
                f()
            except OSError:
                pass


def run_instances(ctx, sec, want):
    n, notes = scale_limits(want)
    sec.notes += notes
    if n < 1:
        raise BenchError("the machine allows no instance (%s)" % "; ".join(notes))
    pb, sleep = ctx.prebind, "/usr/bin/sleep"
    life = "120"
    token = "%d-%d" % (os.getpid(), time.monotonic_ns())
    env = dict(ENV, PREBIND_BENCH_SCALE=token)
    argv = [pb, "-q", "--port-fd=3", "--", sleep, life]
    inst = []       # (pid, port)
    lat = []
    errors = []
    mem_before = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    t_start = time.perf_counter()
    deadline = time.monotonic() + (20 if ctx.smoke else 90)    # within sleep's 120 s
    try:
        while len(inst) < n and not errors:
            if time.monotonic() > deadline:
                errors.append("start budget spent after %d instances" % len(inst))
                break
            batch = []
            for _ in range(min(SCALE_BATCH, n - len(inst))):
                r, w = os.pipe()
                t0 = time.perf_counter()
                try:
                    pid = spawn(argv, env=env, fd3=w)
                except OSError as e:
                    os.close(r)
                    errors.append("instance %d could not be spawned: %s (%d processes running)"
                                  % (len(inst) + len(batch) + 1, e.strerror, count_processes()))
                    break
                finally:
                    os.close(w)
                batch.append((pid, r, t0))
            for pid, r, t0 in batch:
                line = read_first_line(r, max(1.0, deadline - time.monotonic()))
                t1 = time.perf_counter()
                os.close(r)
                if line is None or not line.strip().isdigit():
                    # The first failure ends the run: the rest of the batch is read, not added.
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
        sups = {pid for pid, _ in inst}
        procs = marked(token)
        guards = [p for p in procs if p not in sups and read_comm(p) == "prebind-guard"]
        rss = pss = uss = g_pss = g_uss = 0
        alive = 0
        sup_mms = set()
        for pid in sups:
            st = proc_kv("/proc/%d/status" % pid)
            if st:
                alive += 1
            rss += st.get("VmRSS", 0)
            u, ps = private_kb(pid)
            uss, pss = uss + u, pss + ps
            sup_mms.add(mm_of(pid))
        # A guard on its prebind's memory has the same pages: counted once.
        forked = [pid for pid in guards if mm_of(pid) not in sup_mms]
        for pid in forked:
            u, ps = private_kb(pid)
            g_uss, g_pss = g_uss + u, g_pss + ps
        mem_after = proc_kv("/proc/meminfo").get("MemAvailable", 0)
    finally:
        t_stop0 = time.perf_counter()
        codes, forced = stop_all([pid for pid, _ in inst], 60)
        for pid in list(LIVE):     # instances whose port never came
            reap(pid, 2, term=True)
        t_stop = time.perf_counter() - t_stop0
    bad_exit = sum(1 for c in codes.values() if c != 143)
    # The guards exit on their own once prebind said goodbye: bounded.
    left_deadline = time.monotonic() + 30
    while marked(token) and time.monotonic() < left_deadline:
        time.sleep(0.1)
    strays = marked(token)
    for pid in strays:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    k = len(inst)
    tini_uss = tini_private(ctx, 10 if ctx.smoke else 100)
    per_uss = (uss + g_uss) / max(1, alive)
    sec.table(["instances", "ports distinct", "listening", "time to start all s", "per instance ms (median / p90)",
               "Σ RSS MB", "Σ PSS MB (prebind + guard)", "private kB per instance (prebind + guard)",
               "tini private kB", "stop all s"],
              [[k, "%d / %d" % (distinct, k), "%d / %d" % (k - refused, k), "%.2f" % t_all,
                "%s / %s" % (ms(median(lat), 1), ms(pct(lat, 90), 1)),
                "%.1f" % (rss / 1024), "%.1f" % ((pss + g_pss) / 1024),
                "%.0f (%.0f + %.0f)" % (per_uss, uss / max(1, alive), g_uss / max(1, len(forked))),
                "%s" % ("n/a" if tini_uss is None else "%.0f" % tini_uss), "%.2f" % t_stop]])
    sec.notes.append("`prebind -q --port-fd=3 -- sleep %s` × %d, batches of %d, posix_spawn from one python "
                     "process, stopping at the first instance that fails; each prebind's guard found by a "
                     "marker in its environment (%d guards found); the sleep children are not counted. "
                     "Private = Private_Clean + Private_Dirty of smaps_rollup; tini: the median of %d "
                     "`tini -s -- sleep` side by side." % (life, k, SCALE_BATCH, len(guards),
                                                          10 if ctx.smoke else 100))
    sec.notes.append("%d of the %d guards run on their prebind's memory (the same address space: the same "
                     "start of code and of stack in /proc/PID/stat): their pages are prebind's, counted "
                     "once (the + 0). A forked guard's own are added; the pages it still shares "
                     "copy-on-write with its prebind count for neither, so a forked guard's figure is low "
                     "(2026-12-06's 102 kB was)." % (len(guards) - len(forked), len(guards)))
    if mem_before and mem_after:
        sec.notes.append("MemAvailable before minus while running: %.1f MB (prebind + guard + sleep + "
                         "sockets; the whole machine, so noisy)" % ((mem_before - mem_after) / 1024))
    sec.notes.append("Stop: SIGTERM to each prebind; %d exited 143, %d other, %d needed SIGKILL; "
                     "processes of the run left afterwards: %d." % (len(codes) - bad_exit, bad_exit, forced,
                                                                   len(strays)))
    failures = errors + (["%d duplicate ports" % (k - distinct)] if distinct != k else []) \
        + (["%d ports refused a connection" % refused] if refused else []) \
        + (["%d instances did not exit 143 on SIGTERM" % bad_exit] if bad_exit else []) \
        + (["%d processes left" % len(strays)] if strays else [])
    if k < n or failures:
        sec.status, sec.reason = "failed", "; ".join(failures[:5]) or "only %d of %d started" % (k, n)
    ctx.results["scale"] = dict(n=k, t_all=t_all, pss=pss + g_pss, uss=per_uss, tini_uss=tini_uss)
    sec.summary.append(["%d concurrent instances, started in" % k, "%.2f s" % t_all, "—", "—", "≤ 30 s",
                        verdict(distinct == k and k == n and t_all <= 30)])
    if tini_uss:
        sec.summary.append(["private memory per instance (prebind + guard)", "%.0f kB" % per_uss,
                            "tini %.0f kB" % tini_uss, ratio(per_uss, tini_uss), "≤ 1.00×",
                            verdict(per_uss <= tini_uss)])


def mm_of(pid):
    """Which address space pid runs in: its start of code and of stack
    (/proc/PID/stat fields 26 and 28), random per address space (ASLR),
    the same for processes that share one (clone(CLONE_VM))."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return ("gone", pid)
    return fields[26 - 3], fields[28 - 3]


def read_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def stop_all(pids, timeout):
    """SIGTERM to every prebind (forwarded to its sleep), reaped as they
    exit, bounded; SIGKILL to the groups of the rest. Returns ({pid: exit
    code}, how many needed SIGKILL)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    pending = set(pids)
    codes = {}
    stop_deadline = time.monotonic() + timeout
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
    return codes, forced

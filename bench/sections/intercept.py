"""8. --intercept: what the interposer costs a server."""

import json
import os
import re
import shlex
import shutil
import socket
import tempfile
import time

from harness import (DEFAULT_PATH, PYTHON, Missing, BenchError, spawn, has_exited, reap, run, need, median,
                     ms, ratio, verdict)


NGINX_BENCH_CONF = """daemon off;
master_process on;
worker_processes 1;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    server { listen %(port)d; location / { return 200 "hello\\n"; } }
}
"""


def intercept_library(ctx):
    """The interposer of the prebind under test: beside it, as meson builds
    it, copied with it into the work directory (prebind finds it there)."""
    src = os.path.join(os.path.dirname(ctx.prebind_orig), "intercept", "libprebind-intercept.so")
    if not os.path.exists(src):
        raise Missing("libprebind-intercept.so beside %s" % ctx.prebind_orig)
    dst_dir = os.path.join(ctx.work, "intercept")
    os.makedirs(dst_dir, exist_ok=True)
    dst = os.path.join(dst_dir, "libprebind-intercept.so")
    shutil.copy2(src, dst)
    return dst


def wait_port_file(path, pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text.split()[0])
        except FileNotFoundError:
            pass
        if has_exited(pid):
            break
        time.sleep(0.01)
    raise BenchError("no port published in %s" % path)


def wrk_rate(wrk, port, seconds):
    # One wrk thread: with nginx's one worker, a core each (two wrk
    # threads and nginx on two cores made the rounds swing by ±20 %).
    out = run([wrk, "-t", "1", "-c", "32", "-d", "%ds" % seconds, "http://127.0.0.1:%d/" % port],
              timeout=seconds + 30).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if not m or (errs and sum(int(x) for x in errs.groups())):
        raise BenchError("wrk failed against port %d: %s" % (port, out[-300:]))
    return float(m.group(1))


def bench(ctx, sec):
    """wrk against nginx binding its own port, directly and under prebind
    --intercept through seccomp and through the interposer (its bind()
    gets prebind's socket), rounds alternated; and hyperfine: what the
    interposer adds to a program's start when it is preloaded (python3 -c
    pass, which binds nothing), and what the seccomp probe and filter add
    to `prebind -- true`."""
    wrk, hyperfine = need("wrk", "hyperfine")
    nginx = shutil.which("nginx", path="/usr/sbin:" + DEFAULT_PATH)
    if not nginx:
        raise Missing("nginx (nginx-light)")
    library = intercept_library(ctx)
    seconds, rounds = (1, 1) if ctx.smoke else (3, 9)
    modes = ["direct", "seccomp", "preload"]
    rates = {m: [] for m in modes}
    for rnd in range(rounds):
        order = modes if rnd % 2 == 0 else modes[::-1]
        for mode in order:
            d = tempfile.mkdtemp(prefix="nginx-", dir=ctx.work)
            with socket.socket() as s:      # a free port for the direct run (a benchmark may race)
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            with open(os.path.join(d, "nginx.conf"), "w") as f:
                f.write(NGINX_BENCH_CONF % {"dir": d, "port": port})
            argv = [nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log")]
            port_file = os.path.join(d, "port")
            if mode != "direct":
                argv = [ctx.prebind, "-q", "--port-file=" + port_file, "--intercept-via=" + mode,
                        "--intercept=%d" % port, "--"] + argv
            pid = spawn(argv)
            try:
                if mode != "direct":
                    target = wait_port_file(port_file, pid, 20)
                else:
                    target = port
                    deadline = time.monotonic() + 20
                    while True:
                        try:
                            socket.create_connection(("127.0.0.1", port), timeout=1).close()
                            break
                        except OSError:
                            if time.monotonic() > deadline or has_exited(pid):
                                raise BenchError("nginx did not listen on %d" % port)
                            time.sleep(0.02)
                rates[mode].append(wrk_rate(wrk, target, seconds))
            finally:
                reap(pid, 10, term=True)
    direct, intercepted, preloaded = (median(rates[m]) for m in modes)
    # The ratios: the median of each round's own ratio (the modes of one
    # round run back to back), steadier than a ratio of medians when the
    # shared machine drifts between rounds.
    seccomp_ratio, preload_ratio = (median([x / d for x, d in zip(rates[m], rates["direct"])])
                                    for m in ("seccomp", "preload"))

    # Launch: prebind -- true, and the same with --intercept (seccomp:
    # the probe, the filter; true binds nothing, so prebind exits with
    # its status once it is gone).
    launch = [("prebind -- true", [ctx.prebind, "-q", "--", "/bin/true"]),
              ("prebind --intercept=8000 -- true",
               [ctx.prebind, "-q", "--intercept-via=seccomp", "--intercept=8000", "--", "/bin/true"])]
    runs, warmup = (5, 1) if ctx.smoke else (50, 10)
    launch_times = {n: [] for n, _ in launch}
    for rnd in range(1 if ctx.smoke else 10):
        order = launch if rnd % 2 == 0 else launch[::-1]
        out = os.path.join(ctx.work, "intercept-launch-%d.json" % rnd)
        r = run([hyperfine, "-N", "-i", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
                 "--export-json", out] + [shlex.join(c) for _, c in order], timeout=300)
        if r.returncode != 0:
            raise BenchError("hyperfine failed: %s" % r.stderr[-300:])
        with open(out) as f:
            by_cmd = {x["command"]: x for x in json.load(f)["results"]}
        for name, c in order:
            launch_times[name] += [t * 1000 for t in by_cmd[shlex.join(c)]["times"]]
    plain_launch = median(launch_times["prebind -- true"])
    seccomp_launch = median(launch_times["prebind --intercept=8000 -- true"])

    # What one system call costs under the filter (perf bench syscall
    # basic: getppid() in a loop), alone and under prebind --intercept:
    # the part of nginx's cost that is the filter's, without wrk's noise.
    perf = shutil.which("perf", path="/usr/bin:" + DEFAULT_PATH)
    syscall_ns = {"direct": [], "seccomp": []}
    if perf:
        loops = "100000" if ctx.smoke else "5000000"
        bench_argv = [perf, "bench", "syscall", "basic", "--loop", loops]
        for rnd in range(1 if ctx.smoke else 6):
            for mode in (["direct", "seccomp"] if rnd % 2 == 0 else ["seccomp", "direct"]):
                argv = bench_argv if mode == "direct" else [ctx.prebind, "-q", "--intercept-via=seccomp",
                                                             "--intercept=8000", "--"] + bench_argv
                m = re.search(r"([\d.]+) usecs/op", run(argv, timeout=120).stdout)
                if not m:
                    raise BenchError("perf bench syscall basic printed no usecs/op (%s)" % mode)
                syscall_ns[mode].append(float(m.group(1)) * 1000)

    # Start-up: the same python3 -c pass, with and without the interposer
    # preloaded (and the variables that make it active).
    fake_env = ["PREBIND_BROKER=@prebind/bench-nobody", "PREBIND_INTERCEPT=8000/tcp"]
    cmds = [("python3 -c pass", ["/usr/bin/env", PYTHON, "-c", "pass"]),
            ("python3 -c pass, interposer preloaded",
             ["/usr/bin/env", "LD_PRELOAD=" + library] + fake_env + [PYTHON, "-c", "pass"])]
    runs, warmup = (5, 1) if ctx.smoke else (60, 5)
    times = {n: [] for n, _ in cmds}
    for rnd in range(1 if ctx.smoke else 4):
        order = cmds if rnd % 2 == 0 else cmds[::-1]
        out = os.path.join(ctx.work, "intercept-start-%d.json" % rnd)
        r = run([hyperfine, "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
                 "--export-json", out] + [shlex.join(c) for _, c in order], timeout=300)
        if r.returncode != 0:
            raise BenchError("hyperfine failed: %s" % r.stderr[-300:])
        with open(out) as f:
            by_cmd = {x["command"]: x for x in json.load(f)["results"]}
        for name, c in order:
            times[name] += [t * 1000 for t in by_cmd[shlex.join(c)]["times"]]
    base = median(times["python3 -c pass"])
    pre = median(times["python3 -c pass, interposer preloaded"])

    sec.table(["measure", "without", "with --intercept", "ratio"], [
        ["nginx `return 200`, wrk -t1 -c32, requests/s (median of %d; ratio: median of the rounds'), seccomp"
         % rounds, "%.0f" % direct, "%.0f" % intercepted, "%.2f×" % seccomp_ratio],
        ["the same, preload (the interposer)", "%.0f" % direct, "%.0f" % preloaded, "%.2f×" % preload_ratio],
        ["`prebind -- true`, median ms, seccomp", ms(plain_launch), ms(seccomp_launch),
         ratio(seccomp_launch, plain_launch)],
        ["`python3 -c pass`, median ms, interposer preloaded", ms(base), ms(pre), ratio(pre, base)],
    ] + ([["a system call (`perf bench syscall basic`, getppid), median ns, seccomp",
           "%.0f" % median(syscall_ns["direct"]), "%.0f" % median(syscall_ns["seccomp"]),
           ratio(median(syscall_ns["seccomp"]), median(syscall_ns["direct"]))]] if perf else []))
    sec.notes.append("nginx-light, worker_processes 1, access_log off, the same configuration; the "
                     "intercepted nginx binds its configured port and gets prebind's 127.0.0.1 socket, "
                     "through seccomp user notification (every system call of nginx's passes the filter) "
                     "or through the LD_PRELOAD interposer; rounds of %ds, alternated." % seconds)
    sec.notes.append("Each round's ratio to direct, in order: seccomp %s; preload %s." % tuple(
        " ".join("%.2f" % (x / d) for x, d in zip(rates[m], rates["direct"])) for m in ("seccomp", "preload")))
    sec.notes.append("Start-up: hyperfine -N, %d warm-up + %d runs per round, rounds in alternated order; "
                     "both through /usr/bin/env, the second with LD_PRELOAD and the broker variables set "
                     "(no bind, so no broker is asked)." % (warmup, runs))
    ctx.results["intercept"] = {"direct": direct, "intercepted": intercepted, "preloaded": preloaded,
                                "rates": rates, "syscall_ns": syscall_ns, "seccomp_ratio": seccomp_ratio, "preload_ratio": preload_ratio,
                                "start": base, "start_pre": pre, "launch": plain_launch,
                                "launch_seccomp": seccomp_launch}
    sec.summary.append(["nginx requests/s, --intercept (seccomp) vs direct", "%.0f" % intercepted,
                        "direct %.0f" % direct, "%.2f×" % seccomp_ratio, "≥ 0.98×", verdict(seccomp_ratio >= 0.98)])
    sec.summary.append(["`prebind --intercept=P -- true` (seccomp)", ms(seccomp_launch) + " ms",
                        "`prebind -- true` " + ms(plain_launch) + " ms", ratio(seccomp_launch, plain_launch),
                        "≤ 1.05×", verdict(seccomp_launch <= 1.05 * plain_launch)])
    sec.summary.append(["`python3 -c pass` with the interposer", ms(pre) + " ms", "without " + ms(base) + " ms",
                        ratio(pre, base), "≤ 1.05×", verdict(pre <= 1.05 * base)])

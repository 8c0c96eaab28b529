"""11. Forwarding into a namespace: bench/forward_rate."""

import json
import os

from harness import HERE, BenchError, run, need, ratio, verdict


def bench(ctx, sec):
    """--netns --intercept forwarding against the server reached directly,
    socat and systemd-socket-proxyd: bench/forward_rate runs them all in
    one private network namespace, with bench/forward_load.c as server and
    clients."""
    need("socat", "systemd-socket-activate", "unshare", "cc")
    size = (64 << 20) if ctx.smoke else (1 << 30)
    rounds = 1 if ctx.smoke else 5
    conns = 200 if ctx.smoke else 2000
    r = run([os.path.join(HERE, "forward_rate"), "--prebind", ctx.prebind, "--bytes", str(size),
             "--rounds", str(rounds), "--connections", str(conns), "--json"], 1800)
    if r.returncode != 0:
        raise BenchError("forward_rate failed: %s" % (r.stdout + r.stderr)[-300:])
    data = json.loads(r.stdout.strip().splitlines()[-1])["results"]
    direct = data["direct (no forwarder)"]
    pb = data["prebind --netns --intercept"]
    rows = []
    for name, v in data.items():
        rows.append(["`%s`" % name if name != "direct (no forwarder)" else name,
                     "%.2f" % v["down_gbps"], "%.2f" % v["up_gbps"], "%.2f" % v["down8_gbps"],
                     ratio(v["down_gbps"], direct["down_gbps"]),
                     "%.0f / %.0f" % (v["connect_median_us"], v["connect_p99_us"]),
                     "%.0f / %.0f" % (v["rtt_median_us"], v["rtt_p99_us"]),
                     "%.2f" % v["cpu_s_per_gib"] if "cpu_s_per_gib" in v else "–"])
    sec.table(["path", "down GB/s (1 conn)", "up GB/s (1 conn)", "down GB/s (8 conns)", "down vs direct",
               "connect+1st byte µs (median / p99)", "1-byte round trip µs (median / p99)",
               "forwarder CPU s per GiB"], rows)
    sec.notes.append("bench/forward_rate: %d MiB per transfer, best of %d rounds interleaved across the paths; %d connections one after the "
                     "other for the connect latency; 10000 round trips on one connection (1000 in --smoke). "
                     "socat with its defaults (TCP-LISTEN,fork), systemd-socket-proxyd started by "
                     "systemd-socket-activate, prebind with the server in its own namespace on port 8080, "
                     "and prebind --intercept through seccomp, the server binding 8081 and handed prebind's "
                     "socket (nothing forwarded: its CPU column is prebind's own). "
                     "Client, forwarder and server share the machine's cores. Forwarder CPU: the "
                     "forwarder process's user + system time (socat: with its children) over the "
                     "throughput rounds, per GiB moved; what forwarding costs whatever the cores."
                     % (size >> 20, rounds, conns))
    peers = [data["socat"], data["systemd-socket-proxyd"]]
    handed = data.get("prebind --intercept (seccomp)")
    if handed:
        worse = min(handed["down_gbps"], handed["up_gbps"])
        worse_direct = min(direct["down_gbps"], direct["up_gbps"])
        sec.summary.append(["--intercept (seccomp) throughput (GB/s, worse direction)", "%.2f" % worse,
                            "direct %.2f" % worse_direct, ratio(worse, worse_direct), "≥ 0.98×",
                            verdict(worse >= 0.98 * worse_direct)])
    tput = min(pb["down_gbps"], pb["up_gbps"])
    best_peer = max(min(p["down_gbps"], p["up_gbps"]) for p in peers)
    ctx.results["forward"] = data
    sec.summary.append(["forward throughput (GB/s, worse direction)", "%.2f" % tput,
                        "direct %.2f" % min(direct["down_gbps"], direct["up_gbps"]),
                        ratio(tput, min(direct["down_gbps"], direct["up_gbps"])), "≥ 0.80×",
                        verdict(tput >= 0.8 * min(direct["down_gbps"], direct["up_gbps"]))])
    sec.summary.append(["forward throughput vs best peer", "%.2f" % tput, "peer %.2f" % best_peer,
                        ratio(tput, best_peer), "≥ 1.00×", verdict(tput >= best_peer)])
    cheapest = min(p["cpu_s_per_gib"] for p in peers)
    sec.summary.append(["forwarder CPU (s per GiB)", "%.2f" % pb["cpu_s_per_gib"], "cheapest peer %.2f" % cheapest,
                        ratio(pb["cpu_s_per_gib"], cheapest), "≤ 1.00×",
                        verdict(pb["cpu_s_per_gib"] <= cheapest)])

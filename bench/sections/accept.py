"""6. Accept rate: bench/accept_rate."""

import json
import os

from harness import HERE, BenchError, run, need, ratio, verdict


def bench(ctx, sec):
    """Connections per second of one-process-per-connection spawners, side by
    side: bench/accept_rate runs them in a private network namespace with
    /bin/echo as the handler, and the raw fork+exec rate as the ceiling."""
    need("tcpserver", "socat", "systemd-socket-activate", "unshare", "cc")
    n = 200 if ctx.smoke else 3000
    rounds = 1 if ctx.smoke else 3
    r = run([os.path.join(HERE, "accept_rate"), "--prebind", ctx.prebind, "--connections", str(n),
             "--rounds", str(rounds), "--json"], 600)
    if r.returncode != 0:
        raise BenchError("accept_rate failed: %s" % r.stderr[-300:])
    data = json.loads(r.stdout.strip().splitlines()[-1])
    pb = data["servers"]["prebind --accept --inetd"]
    rows = [["fork+exec alone (ceiling)", data["ceiling_fork_exec"], ratio(data["ceiling_fork_exec"], pb)]]
    for name, rate in data["servers"].items():
        rows.append(["`%s`" % name, rate, ratio(rate, pb)])
    sec.table(["spawner (handler /bin/echo)", "connections/s (best round)", "vs prebind"], rows)
    sec.notes.append("bench/accept_rate: %d connections per round from 2 client processes (bench/conn_client.c, "
                     "connect and read to EOF), best of %d rounds, in a private network namespace; "
                     "prebind --max-connections=64, tcpserver -c 64." % (n, rounds))
    others = [v for k, v in data["servers"].items() if not k.startswith("prebind")]
    if stderr := r.stderr.strip():
        sec.notes.append("failures reported: " + stderr.replace("\n", "; ")[:300])
    ctx.results["accept"] = (pb, others)
    sec.summary.append(["accept rate (conn/s)", str(pb), "best peer %d" % max(others),
                        ratio(pb, max(others)), "≥ 1.00×", verdict(pb >= max(others))])

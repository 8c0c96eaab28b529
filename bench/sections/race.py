"""3. The port race: bench/race.py."""

import json
import os
import subprocess

from harness import HERE, TOP, ENV, PYTHON, BenchError, run, need, ms, verdict


def bench(ctx, sec):
    """Calls bench/race.py (pick-a-port vs prebind, counting EADDRINUSE and
    wrong-server answers) in a private network namespace with a narrow port
    range; falls back to the host's namespace (noted) where namespaces are
    not available."""
    need("unshare")
    race = os.path.join(HERE, "race.py")
    if ctx.smoke:
        args = ["--workers", "4", "--starts", "3", "--max-seconds", "20", "--timeout", "5"]
    else:
        args = ["--workers", "8", "--starts", "250", "--max-seconds", "120"]
    base = [PYTHON, race, "--json", "--prebind", ctx.prebind] + args
    attempts = [base + ["--netns"], base]
    data = None
    for argv in attempts:
        try:
            r = run(argv, timeout=200, env=dict(ENV))
        except subprocess.TimeoutExpired:
            raise BenchError("race.py did not finish in 200 s")
        if r.returncode == 2 and "--netns" in argv:
            sec.notes.append("--netns refused (%s); ran in the host namespace instead"
                             % (r.stderr.strip().splitlines() or ["?"])[-1])
            continue
        try:
            data = json.loads(r.stdout)
        except ValueError:
            raise BenchError("race.py exit %d, no JSON: %s" % (r.returncode, r.stderr.strip()[-400:]))
        break
    if data is None:
        raise BenchError("race.py could not run")
    rows = []
    by = {}
    for x in data["results"]:
        by[x["mode"]] = x
        rows.append([x["mode"], x["starts"], x["eaddrinuse"], x["wrong_server"], x["other_errors"],
                     x["failed_starts"], x["distinct_ports"],
                     ms(x["gap_ms_median"], 0) if x["gap_ms_median"] is not None else "—",
                     ms(x["answer_ms_median"], 0), "%.1f" % x["seconds"]])
    sec.table(["mode", "starts", "EADDRINUSE", "wrong server", "other errors", "failed",
               "ports", "close→listen gap ms", "answer ms (median)", "seconds"], rows)
    sec.notes += [h.replace(ctx.prebind, "PREBIND") for h in data.get("header", [])]
    sec.notes.append("`%s` (PREBIND: a copy of %s)" % (" ".join(["bench/race.py"] + argv[3:]).replace(
        ctx.prebind, "PREBIND"), os.path.relpath(ctx.prebind_orig, TOP)))
    for x in data["results"]:
        if x.get("error_kinds"):
            sec.notes.append("%s other errors: %s" % (x["mode"], json.dumps(x["error_kinds"])))
    pb, pp = by.get("prebind"), by.get("pickport")
    if not pb or pb["starts"] == 0:
        raise BenchError("race.py ran no prebind start (%s)" % "; ".join(data.get("reasons", [])))
    # Counted as a failure of this benchmark: prebind losing the race (a
    # correctness result, not a timing one).  Timeouts on a loaded machine
    # are shown under "other errors" but do not fail the run.
    if pb["eaddrinuse"] or pb["wrong_server"]:
        sec.status, sec.reason = "failed", "prebind lost the race: %d EADDRINUSE, %d wrong server" % (
            pb["eaddrinuse"], pb["wrong_server"])
    ctx.results["race"] = by
    sec.summary.append(["race: failed starts", "%d / %d" % (pb["failed_starts"], pb["starts"]),
                        "pick-a-port %d / %d" % (pp["failed_starts"], pp["starts"]) if pp else "—",
                        "—", "prebind 0", verdict(pb["failed_starts"] == 0)])

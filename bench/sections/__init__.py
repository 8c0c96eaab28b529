"""The sections of bench/run, in the order they run and are reported.

Each is a module of this package named by its key, with one function,
bench(ctx, sec): it measures, fills sec (the table, notes, summary rows)
and raises harness.Missing, Skip or BenchError when it cannot run.  Adding
a section is a file here and a line in SECTIONS."""

import importlib

# (key = module name, title in the report)
SECTIONS = [
    ("launch", "1. Launch cost: `X -- true`"),
    ("url", "1b. Start to a published URL"),
    ("memory", "2. Memory of the supervising process"),
    ("race", "3. The port race (bench/race.py)"),
    ("scale", "4. Scale: concurrent instances"),
    ("ttfr", "5. Time to first response (uvicorn fixture)"),
    ("accept", "6. Accept rate"),
    ("restart", "7. Restart under load"),
    ("reload", "7b. Reload under load: --reload=overlap"),
    ("intercept", "8. --intercept (seccomp, preload): nginx under load, and start-up"),
    ("ready", "9. Readiness without sd_notify: start to first query"),
    ("relay", "10. Output relay throughput (`--ready-log`)"),
    ("forward", "11. Forwarding into a namespace (--netns --intercept)"),
    ("static", "12. The static binary: prebind-static next to tini-static"),
    ("share", "13. --share: attaching to a shared server"),
    ("runners", "14. Test runners: glue and start-up"),
    ("previous", "15. Against an earlier prebind: launch, accept, reload"),
    ("profile", "Launch profile: where prebind's time goes"),
]
# Sections that --smoke leaves out unless --only names them.
FULL_ONLY = {"profile"}

KEYS = [key for key, _ in SECTIONS]


def bench_of(key):
    """The bench(ctx, sec) function of section key."""
    return importlib.import_module(__name__ + "." + key).bench

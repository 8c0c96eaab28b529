"""bench/render.py - the report of a run: each section's markdown, the
machine and versions it ran on, the summary, and the results section of
BENCHMARKS.md (rewritten between its markers by a full run)."""

import datetime
import os
import platform
import subprocess

from harness import TOP, run


BENCHMARKS_MD = os.path.join(TOP, "BENCHMARKS.md")
RESULTS_BEGIN = "<!-- bench/run results: begin (generated, do not edit by hand) -->"
RESULTS_END = "<!-- bench/run results: end -->"


class Section:
    """One benchmark's outcome: a markdown table, notes, and a status:
    ok, failed (could not run: exit 1), skipped (missing tool with
    --allow-missing, or the time budget), pending (a hook not implemented)."""

    def __init__(self, key, title):
        self.key, self.title = key, title
        self.status, self.reason = "ok", ""
        self.header, self.rows, self.notes = [], [], []
        self.summary = []     # rows for the summary table
        self.seconds = 0.0

    def table(self, header, rows):
        self.header, self.rows = header, rows

    def markdown(self):
        out = ["### %s" % self.title, ""]
        if self.status != "ok":
            out += ["**%s**: %s" % (self.status, self.reason), ""]
        if self.header:
            out.append("| " + " | ".join(self.header) + " |")
            out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.header))) + "|")
            for r in self.rows:
                out.append("| " + " | ".join(str(c) for c in r) + " |")
            out.append("")
        for n in self.notes:
            out.append("- " + n)
        if self.notes:
            out.append("")
        return "\n".join(out)


def sh(argv):
    try:
        r = run(argv, 20)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def deb_version(pkg):
    try:
        r = run(["dpkg-query", "-W", "-f=${Version}", pkg], 20)
        return r.stdout.strip() if r.returncode == 0 else "not installed"
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine_info(ctx):
    try:
        with open("/etc/debian_version") as f:
            debian = f.read().strip()
    except OSError:
        debian = "not Debian"
    rev = sh(["git", "-C", TOP, "rev-parse", "--short", "HEAD"])
    dirty = run(["git", "-C", TOP, "status", "--porcelain", "--", "src", "meson.build"], 20).stdout.strip()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    tools = ", ".join("%s %s" % (p, deb_version(p)) for p in
                      ["hyperfine", "tini", "dumb-init", "catatonit", "time", "python3-uvicorn",
                       "util-linux", "valgrind", "wrk"])
    return [
        "date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine: %s cores (`nproc`), kernel %s, Debian %s, %s" % (
            sh(["nproc"]), platform.release(), debian,
            sh(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]).strip()),
        "prebind: %s, commit %s%s (%s)" % (sh([ctx.prebind_orig, "--version"]), rev,
                                            " + uncommitted changes in src/" if dirty else "",
                                            os.path.relpath(ctx.prebind_orig, TOP)),
        "python: %s" % platform.python_version(),
        "tools (Debian packages): %s" % tools,
        "load average at start: %s" % load,
    ]


def render(ctx, sections, info, total_seconds):
    out = ["## Results", ""]
    out += ["- " + x for x in info]
    out.append("- run time: %.0f s (`bench/run`%s)" % (total_seconds, " --smoke" if ctx.smoke else ""))
    out.append("")
    out += ["### Summary", "",
            "| benchmark | prebind | reference | ratio | target | met |",
            "|---|---:|---:|---:|---:|---:|"]
    for s in sections:
        for row in s.summary:
            out.append("| " + " | ".join(row) + " |")
        if not s.summary:
            out.append("| %s | %s | | | | |" % (s.title, s.status + (": " + s.reason if s.reason else "")))
    out.append("")
    for s in sections:
        out.append(s.markdown())
    return "\n".join(out).rstrip() + "\n"


def write_benchmarks_md(text):
    try:
        with open(BENCHMARKS_MD) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = "# Benchmarks\n\n%s\n%s\n" % (RESULTS_BEGIN, RESULTS_END)
    if RESULTS_BEGIN not in doc or RESULTS_END not in doc:
        doc = doc.rstrip() + "\n\n%s\n%s\n" % (RESULTS_BEGIN, RESULTS_END)
    head, rest = doc.split(RESULTS_BEGIN, 1)
    _, tail = rest.split(RESULTS_END, 1)
    new = head + RESULTS_BEGIN + "\n\n" + text + "\n" + RESULTS_END + tail
    tmp = BENCHMARKS_MD + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, BENCHMARKS_MD)

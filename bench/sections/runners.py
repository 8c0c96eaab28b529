"""14. Test runners: glue and start-up."""

import glob
import json
import os
import re
import shutil
import subprocess

from harness import DEFAULT_PATH, ENV, TOP, BenchError, Missing, Skip, run, median, pct, ms, ratio

GLUE = os.path.join(TOP, "bench", "runners", "glue")
SAMPLES = os.path.join(TOP, "js", "samples")
GO_EXAMPLE = os.path.join(TOP, "go", "example")
# What the timed driver installs from the npm registry (pinned).
NPM_PACKAGES = ["get-port@7.1.0", "wait-on@8.0.5"]

# The samples' glue: the files that are nothing else (counted whole), and
# in the other files (configs, tests) the statements that name prebind or
# the glue files (a statement: from the line that names it until its
# brackets close).
JS_GLUE = re.compile(r"prebind|Prebind|PREBIND|fixtures\.js|workerServer|global-setup|global-teardown")
# In test files, not the assertions on prebind's environment (PREBIND_URL).
JS_TEST_GLUE = re.compile(r"prebind|Prebind|fixtures\.js|workerServer")
GO_GLUE = re.compile(r"prebindtest|TestMain|^var (srv|greeter) ")
IMPORT = re.compile(r"^\s*(import\b|const \{[^}]*\} = require\(|\"[^\"]+\"$)")
# runner: (files that are only glue, config files, test files)
JS_SAMPLES = [
    ("vitest", ["global-setup.js", "fixtures.js"], ["vitest.config.js"], "tests/*.test.js"),
    ("jest", ["global-setup.js", "global-teardown.js"], ["jest.config.js"], "tests/*.test.js"),
    ("node-test", [], [], "tests/*.test.js"),
    ("playwright", ["fixtures.js"], ["playwright.config.js"], "tests/*.spec.js"),
]
COMMENT = re.compile(r"^\s*(//|#|/\*|\*)")


def code_lines(path):
    """The lines of path that are neither blank nor comments."""
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.strip() and not COMMENT.match(l)]


def glue_lines(path, pattern):
    """The statements of path that match pattern, in lines."""
    out, depth = [], 0
    for line in code_lines(path):
        if depth > 0 or pattern.search(line):
            out.append(line)
            depth = max(0, depth + sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}"))
    return out


def per_test_file(lines_of_files):
    """'N' or 'N (I imports)' for the largest of the test files' glue."""
    worst = max(lines_of_files, key=len)
    imports = sum(1 for l in worst if IMPORT.match(l))
    return "%d (%d import%s)" % (len(worst), imports, "" if imports == 1 else "s") if imports else str(len(worst))


def baseline(way, runner, n_tests, extra=()):
    """(project lines, per test file lines, total) of a baseline in GLUE:
    every file of way/runner and extra count once, test-file.* once per
    test file."""
    project, per_test = 0, []
    for path in sorted(glob.glob(os.path.join(GLUE, way, runner, "*"))) + [os.path.join(GLUE, way, e) for e in extra]:
        if os.path.basename(path).startswith("test-file."):
            per_test = code_lines(path)
        else:
            project += len(code_lines(path))
    return project, per_test, project + n_tests * len(per_test)


def count_glue():
    """Rows of the glue table, and {runner: (prebind total, get-port total)}."""
    rows, totals = [], {}
    for runner, whole, configs, tests in JS_SAMPLES:
        d = os.path.join(SAMPLES, runner)
        project = sum(len(code_lines(os.path.join(d, f))) for f in whole)
        project += sum(len(glue_lines(os.path.join(d, f), JS_GLUE)) for f in configs)
        test_glue = [glue_lines(p, JS_TEST_GLUE) for p in sorted(glob.glob(os.path.join(d, tests)))]
        if not test_glue:
            raise BenchError("no test files in js/samples/%s" % runner)
        total = project + sum(len(t) for t in test_glue)
        b_project, b_test, b_total = baseline("get-port-wait-on", runner, len(test_glue), ["start-server.js"])
        totals[runner] = (total, b_total)
        rows.append(["%s (%d test files)" % (runner, len(test_glue)), project, per_test_file(test_glue), total,
                     b_project, per_test_file([b_test]), b_total, ratio(total, b_total)])
        if runner == "vitest":
            t_project, t_test, t_total = baseline("testcontainers", runner, len(test_glue), ["Dockerfile.node"])
            rows.append(["vitest, testcontainers' GenericContainer instead", "", "", "",
                         t_project, per_test_file([t_test]), t_total, ratio(total, t_total)])
    # Go: a package with one server in TestMain (go/example/hello) against
    # the same with testcontainers-go; and the whole example module.
    go_files = sorted(glob.glob(os.path.join(GO_EXAMPLE, "*", "*_test.go")))
    go_glue = {os.path.basename(os.path.dirname(p)): glue_lines(p, GO_GLUE) for p in go_files}
    if "hello" not in go_glue:
        raise BenchError("no go/example/hello/hello_test.go")
    t_project, t_test, _ = baseline("testcontainers", "go", 1, ["Dockerfile.go"])
    hello = len(go_glue["hello"])
    totals["go"] = (hello, t_project + len(t_test))
    rows.append(["go test: a package, one server in TestMain (go/example/hello)", 0, per_test_file([go_glue["hello"]]),
                 hello, "", "", "", ""])
    rows.append(["go test, testcontainers-go's GenericContainer instead", "", "", "",
                 t_project, per_test_file([t_test]), t_project + len(t_test), ratio(hello, t_project + len(t_test))])
    rows.append(["go test: all of go/example (%d packages: %s)" % (len(go_glue), ", ".join(sorted(go_glue))), 0,
                 per_test_file(list(go_glue.values())), sum(len(g) for g in go_glue.values()), "", "", "", ""])
    return rows, totals


def install_npm(ctx):
    """get-port and wait-on from the npm registry into the run's work
    directory; Skip when npm cannot fetch them (no registry here)."""
    node, npm = shutil.which("node", path=DEFAULT_PATH), shutil.which("npm", path=DEFAULT_PATH)
    if not node or not npm:
        raise Missing("node and npm (Debian packages nodejs, npm)")
    d = os.path.join(ctx.work, "runners-npm")
    os.makedirs(d)
    with open(os.path.join(d, "package.json"), "w") as f:
        f.write('{ "private": true }\n')
    # The caller's environment, not the measured one: npm needs its
    # proxy and CA settings (NODE_EXTRA_CA_CERTS, npm_config_*, HTTPS_PROXY).
    env = dict(os.environ, npm_config_audit="false", npm_config_fund="false",
               npm_config_update_notifier="false")
    argv = [npm, "install", "--loglevel=error", "--no-save", "--prefer-offline",
            "--fetch-retries=%d" % (0 if ctx.smoke else 1),
            "--fetch-timeout=%d" % (10000 if ctx.smoke else 20000), "--prefix", d] + NPM_PACKAGES
    try:
        r = run(argv, 30 if ctx.smoke else 90, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Skip("npm install %s: %s" % (" ".join(NPM_PACKAGES), e))
    if r.returncode != 0:
        raise Skip("npm install %s failed (no npm registry here?): %s"
                   % (" ".join(NPM_PACKAGES), " ".join(r.stderr.strip().splitlines()[:2]) or "?"))
    return node, os.path.join(d, "node_modules")


def time_starts(ctx, node, modules):
    """bench/runners/driver.mjs: {way: [ms]} and prebind's start() → URL."""
    n = 3 if ctx.smoke else 40
    env = dict(ENV, PREBIND=ctx.prebind)
    driver = os.path.join(TOP, "bench", "runners", "driver.mjs")
    # Under timeout(1), which kills its process group when it expires: the
    # servers the driver spawned by hand too, even if bench/run is killed.
    limit = 30 + n * 3
    r = run(["/usr/bin/timeout", "-k", "5", str(limit), node, driver, str(n),
             os.path.join(TOP, "js", "prebind", "index.mjs"), modules], limit + 10, env=env)
    if r.returncode != 0:
        raise BenchError("driver.mjs exited %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
    samples, url_ms = {}, []
    for line in r.stdout.splitlines():
        x = json.loads(line)
        samples.setdefault(x["way"], []).append(x["ms"])
        if "urlMs" in x:
            url_ms.append(x["urlMs"])
    return n, samples, url_ms


def bench(ctx, sec):
    """The glue a user writes per project to run a server for each test
    runner's workers (lines, count_glue()), and start → first answer of
    one small Node HTTP server through prebind's npm package (start())
    against get-port + child_process.spawn + wait-on, alternated in one
    process (bench/runners/driver.mjs)."""
    rows, totals = count_glue()
    header = ["runner, fixture", "prebind: project files", "per test file", "total",
              "get-port + wait-on: project files", "per test file", "total", "prebind vs it"]
    sec.table(header, rows)
    sec.notes.append("Glue: lines that are neither blank nor comments. prebind's from js/samples and "
                     "go/example: the files that are only glue whole, and in configs and test files the "
                     "statements that name prebind, its fixtures or global setup. The baselines are "
                     "bench/runners/glue/ (only counted): the same fixtures (a server per worker or file, "
                     "one for the run) with get-port + spawn + wait-on (start-server.js counted in each "
                     "project), and testcontainers' GenericContainer as its documentation writes it, with "
                     "the Dockerfile it needs. Per test file: the test file with the most glue; it is one "
                     "line per server the file uses, and its import (Jest's sample files use three: their "
                     "own, their worker's, the run's; node:test's two).")
    sec.summary.append(["glue lines, Vitest project (js/samples/vitest)", "%d" % totals["vitest"][0],
                        "get-port + wait-on %d" % totals["vitest"][1],
                        ratio(totals["vitest"][0], totals["vitest"][1]), "—", "—"])
    sec.summary.append(["glue lines, Go package with TestMain", "%d" % totals["go"][0],
                        "testcontainers-go %d" % totals["go"][1], ratio(totals["go"][0], totals["go"][1]),
                        "—", "—"])
    ctx.results["runners"] = {"glue": totals}
    node, modules = install_npm(ctx)
    n, samples, url_ms = time_starts(ctx, node, modules)
    pb = "prebind start()"
    for way, got in samples.items():
        if way == pb:
            continue
        rows.append(["start → first answer, median (p90) ms: %s" % way,
                     "", "%s (%s)" % (ms(median(samples[pb]), 1), ms(pct(samples[pb], 90), 1)), "",
                     "", "%s (%s)" % (ms(median(got), 1), ms(pct(got, 90), 1)), "",
                     ratio(median(samples[pb]), median(got))])
    sec.notes.append("Start → first answer: bench/runners/server.js (node:http, the same file both ways), "
                     "from the call until a fetch() of its URL answered, %d rounds alternated in one Node "
                     "process (%s from the npm registry; prebind's package from js/prebind with "
                     "PREBIND=this prebind); stopping not timed. start() itself resolved with the URL in a "
                     "median %s ms, before the server ran." % (n, ", ".join(NPM_PACKAGES), ms(median(url_ms), 1)))
    default = [w for w in samples if "default" in w][0]
    sec.summary.append(["start → first answer, Node server", ms(median(samples[pb]), 1) + " ms",
                        "get-port + wait-on " + ms(median(samples[default]), 1) + " ms",
                        ratio(median(samples[pb]), median(samples[default])), "—", "—"])
    ctx.results["runners"]["start"] = {w: median(v) for w, v in samples.items()}

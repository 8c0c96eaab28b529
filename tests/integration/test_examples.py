"""Every example in examples/ passes its own test, run by its ecosystem's own
runner (pytest with xdist, go test, node --test, cargo test, shell scripts)
against this build's prebind ($PREBIND). A missing toolchain is a failure,
not a skip: CI must install it (the Debian package is named).

Build outputs (Go's build cache, cargo's target directory) go to
$PREBIND_EXAMPLES_CACHE, else to examples-cache/ in the meson build
directory that holds prebind, else to a directory under $TMPDIR; never into
the source tree. Every runner is bounded, and killed with its whole process
group when it overruns."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from conftest import PREBIND, PREBIND_BUILT, PYTHON, need_unshare

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
BUILD_TIMEOUT = 240  # seconds, for runners that compile (go, cargo) on a cold cache
RUN_TIMEOUT = 120
GO_SYSTEMD = "/usr/share/gocode/src/github.com/coreos/go-systemd/activation"


def cache_dir(name):
    base = os.environ.get("PREBIND_EXAMPLES_CACHE")
    if not base:
        build = os.path.dirname(os.path.dirname(PREBIND_BUILT))  # <build>/src/prebind
        if os.path.isdir(os.path.join(build, "meson-private")):
            base = os.path.join(build, "examples-cache")
        else:
            base = os.path.join(tempfile.gettempdir(), f"prebind-examples-cache-{os.getuid()}")
    path = os.path.join(base, name)
    os.makedirs(path, exist_ok=True)
    return path


def need(tool, package):
    """The path of tool, or fail naming the Debian package that has it."""
    path = shutil.which(tool)
    if not path:
        pytest.fail(f"'{tool}' not found: install the Debian package '{package}'")
    return path


def run_runner(argv, cwd, env=None, timeout=RUN_TIMEOUT):
    """Run a test runner to completion, bounded; returns its output
    (stdout and stderr), failing the test unless it exited 0."""
    # This pytest's own variables (PYTEST_CURRENT_TEST, PYTEST_XDIST_*) are
    # not for the runner's.
    full_env = {k: v for k, v in os.environ.items()
                if not (k == "PYTEST_CURRENT_TEST" or k.startswith("PYTEST_XDIST"))}
    full_env.update(PREBIND=PREBIND, PYTHONDONTWRITEBYTECODE="1")
    full_env.update(env or {})
    # A session of its own: on overrun the whole group goes (servers too).
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.stdout.close()
            out = b"(output lost: something outside the group holds the pipe)"
        sys.stdout.write(out.decode(errors="replace"))
        pytest.fail(f"{argv} did not finish within {timeout}s")
    text = out.decode(errors="replace")
    sys.stdout.write(text)  # pytest shows it when the test fails
    tail = "\n".join(text.splitlines()[-40:])
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{tail}"
    return text


def count(pattern, text):
    """The number in the last match of pattern (one group), or 0."""
    found = re.findall(pattern, text, re.MULTILINE)
    return int(found[-1]) if found else 0


def test_python_pytest_xdist():
    # Debian's python owns python3-pytest, -pytest-xdist, -uvicorn, -gunicorn.
    check = subprocess.run([PYTHON, "-c", "import pytest, xdist, uvicorn, gunicorn"],
                           capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        pytest.fail("install the Debian packages python3-pytest python3-pytest-xdist "
                    f"python3-uvicorn python3-gunicorn: {check.stderr.strip()}")
    out = run_runner([PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-n", "auto",
                      "-o", "console_output_style=classic", "."],
                     cwd=os.path.join(EXAMPLES, "python"))
    assert count(r"(\d+) passed", out) >= 9 and " failed" not in out


def test_go_test():
    go = need("go", "golang-go")
    if not os.path.isdir(GO_SYSTEMD):
        pytest.fail("go-systemd not found: install the Debian package 'golang-github-coreos-go-systemd-dev'")
    cache = cache_dir("go")
    out = run_runner([go, "test", "-count=1", "-v", "./..."], cwd=os.path.join(EXAMPLES, "go"),
                     env={"GOCACHE": os.path.join(cache, "build"),
                          "GOPATH": os.path.join(cache, "gopath"),
                          "GOFLAGS": "-mod=mod -modcacherw",
                          "GOPROXY": "off",         # offline: no module may be fetched
                          "GOTOOLCHAIN": "local",
                          "GO111MODULE": "on"},
                     timeout=BUILD_TIMEOUT)
    for test in ("TestServerThroughPrebind", "TestManyServersInParallel", "TestGoSystemdActivation"):
        assert f"--- PASS: {test}" in out
    assert "--- FAIL" not in out


def test_node_test():
    node = need("node", "nodejs")
    out = run_runner([node, "--test", "--test-reporter=tap", "server.test.js"],
                     cwd=os.path.join(EXAMPLES, "node"))
    assert count(r"^# pass (\d+)$", out) >= 4
    assert count(r"^# fail (\d+)$", out) == 0


def test_cargo_test():
    cargo = need("cargo", "cargo")
    need("rustc", "rustc")
    out = run_runner([cargo, "test", "--offline", "--locked"], cwd=os.path.join(EXAMPLES, "rust"),
                     env={"CARGO_TARGET_DIR": os.path.join(cache_dir("cargo"), "target"),
                          "CARGO_TERM_COLOR": "never"},
                     timeout=BUILD_TIMEOUT)
    assert count(r"test result: ok\. (\d+) passed", out) >= 4


def test_shell_ci_script():
    need("curl", "curl")
    need("timeout", "coreutils")
    out = run_runner(["bash", os.path.join(EXAMPLES, "shell", "test.sh")], cwd=EXAMPLES)
    assert re.search(r"^[1-9]\d* passed, 0 failed$", out, re.MULTILINE)


def test_container_entrypoint_as_pid_1():
    for tool, package in (("unshare", "util-linux"), ("nsenter", "util-linux"),
                          ("ip", "iproute2"), ("curl", "curl")):
        need(tool, package)
    need_unshare(*(["--user", "--map-root-user"] if os.geteuid() != 0 else []), "--net", "--pid", "--mount", "--fork",
                 "--mount-proc", "--kill-child")
    out = run_runner(["bash", os.path.join(EXAMPLES, "container", "test.sh")], cwd=EXAMPLES)
    assert re.search(r"^2 passed, 0 failed$", out, re.MULTILINE)


def test_config_template():
    out = run_runner([PYTHON, "-m", "pytest", "-p", "no:cacheprovider",
                      "-o", "console_output_style=classic", "test_config_template.py"],
                     cwd=os.path.join(EXAMPLES, "config-template"))
    assert count(r"(\d+) passed", out) >= 6 and " failed" not in out

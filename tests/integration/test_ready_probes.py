"""--ready-log, --ready-exec, --ready-http: prebind publishes only once a
server that does not speak sd_notify is ready, relays its output byte for
byte, and says what was not met when it gives up."""

import hashlib
import os
import pathlib
import re
import select
import signal
import subprocess
import shutil
import tempfile
import threading
import time

import pytest

from conftest import PREBIND, PYTHON, TIMEOUT, http_get, pid_alive, pipe_full, run, server, wait_for

READY_SERVER = server("ready_server.py")


def start_published(start, args, **kwargs):
    """prebind with --port-fd on a pipe: returns (Prebind, read end)."""
    r, w = os.pipe()
    p = start([f"--port-fd={w}", "--format=port"] + args, pass_fds=[w], **kwargs)
    os.close(w)
    return p, r


def published(fd, timeout=TIMEOUT):
    """What prebind published on the --port-fd pipe, once it closed it
    (empty if it exited without publishing)."""
    data, deadline = b"", time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("nothing published in time")
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return data.decode()
            data += chunk
    finally:
        os.close(fd)


def processes_with(marker):
    """pids whose command line holds marker (a unique argument)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read().replace(b"\0", b" ") and pid_alive(int(pid)):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def data(seed, size):
    return hashlib.shake_256(seed).digest(size)


# ---- --ready-log -------------------------------------------------------------

def test_log_line_publishes_and_the_server_answers_at_once(start):
    t0 = time.monotonic()
    p, r = start_published(start, ["--ready-log=^READY", "--", PYTHON, READY_SERVER, "--ready-after", "0.5",
                                   "--line", "READY to serve"])
    port = published(r).strip()
    assert port.isdigit(), p.stderr_text()
    assert time.monotonic() - t0 >= 0.5
    # No retry loop: the first request after publication is answered.
    status, body = http_get(f"127.0.0.1:{port}")
    assert status == 200 and body.startswith("ok")
    # The line was relayed on prebind's stdout, unchanged.
    assert p.readline() == "READY to serve"


# For COMMAND: drained(fd) returns once prebind has read all that the pipe
# at fd holds (FIONREAD works on either end), or after 30 s.
DRAINED = ("import array, fcntl, termios, time\n"
           "def drained(fd):\n"
           "    deadline, queued = time.monotonic() + 30, array.array('i', [1])\n"
           "    while time.monotonic() < deadline:\n"
           "        fcntl.ioctl(fd, termios.FIONREAD, queued)\n"
           "        if not queued[0]: return\n"
           "        time.sleep(0.005)\n")


def test_partial_line_on_stderr_then_the_line_on_stdout(start):
    script = (DRAINED + "import sys\n"
              "sys.stderr.write('ready'); sys.stderr.flush(); drained(2)\n"
              "print('ready!', flush=True); time.sleep(60)\n")
    p, r = start_published(start, ["-v", "--ready-log=ready", "--", PYTHON, "-c", script])
    assert published(r).strip().isdigit()
    assert p.readline() == "ready!"
    p.stop()
    # The stderr bytes came through as they were, with no newline added,
    # and the half line there did not count: the stdout line did.
    assert "readyprebind: ready: --ready-log matched 'ready!'" in p.err


def test_megabytes_relayed_byte_for_byte_while_the_regex_waits(start):
    out_data, err_data = data(b"out", 4 << 20), data(b"err", 1 << 20)
    # Binary output in uneven writes on both streams, then the ready line.
    script = ("import hashlib, os, sys\n"
              "out = hashlib.shake_256(b'out').digest(4 << 20)\n"
              "err = hashlib.shake_256(b'err').digest(1 << 20)\n"
              "o = e = 0; k = 1\n"
              "while o < len(out) or e < len(err):\n"
              "    n = (k * 7919) % 100000 + 1; k += 1\n"
              "    if o < len(out): o += os.write(1, out[o:o + n])\n"
              "    if e < len(err): e += os.write(2, err[e:e + n // 3 + 1])\n"
              "os.write(1, b'\\nREADY\\n')\n"
              "import time; time.sleep(60)\n")
    p, r = start_published(start, ["-q", "--ready-log=^READY$", "--", PYTHON, "-c", script])
    got = {1: b"", 2: b""}
    want = {1: out_data + b"\nREADY\n", 2: err_data}

    def drain(f, key):
        while len(got[key]) < len(want[key]):
            chunk = os.read(f.fileno(), 1 << 16)
            if not chunk:
                return
            got[key] += chunk

    readers = [threading.Thread(target=drain, args=(p.proc.stdout, 1), daemon=True),
               threading.Thread(target=drain, args=(p.proc.stderr, 2), daemon=True)]
    for t in readers:
        t.start()
    # Bounded, but generous: 5 MiB through Python on a loaded machine.
    assert published(r, timeout=90).strip().isdigit()
    for t in readers:
        t.join(90)
    assert hashlib.sha256(got[1]).hexdigest() == hashlib.sha256(want[1]).hexdigest()
    assert hashlib.sha256(got[2]).hexdigest() == hashlib.sha256(want[2]).hexdigest()
    assert p.stop() == 128 + signal.SIGTERM


# Once ready, the relay splices, and naps a millisecond after a wake-up
# that moved little (so that a steady stream moves in batches): uneven
# writes on both streams, all after the ready line; then COMMAND exits
# while the relay may be napping. Every byte arrives, in order.
UNEVEN_AFTER_READY = ("import hashlib, os, sys, time\n"
                      "os.write(1, b'READY\\n')\n"
                      "out = hashlib.shake_256(b'out').digest(4 << 20)\n"
                      "err = hashlib.shake_256(b'err').digest(1 << 20)\n"
                      "o = e = 0; k = 1\n"
                      "while o < len(out) or e < len(err):\n"
                      "    n = (k * 7919) % 100000 + 1; k += 1\n"
                      "    if k % 50 == 0: time.sleep(0.002)\n"
                      "    if o < len(out): o += os.write(1, out[o:o + n])\n"
                      "    if e < len(err): e += os.write(2, err[e:e + n // 3 + 1])\n")


def test_megabytes_relayed_byte_for_byte_once_ready():
    out = subprocess.run([PREBIND, "-q", "--ready-log=^READY$", "--", PYTHON, "-c", UNEVEN_AFTER_READY],
                         capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr[-300:]
    assert hashlib.sha256(out.stdout).hexdigest() == hashlib.sha256(b"READY\n" + data(b"out", 4 << 20)).hexdigest()
    assert hashlib.sha256(out.stderr).hexdigest() == hashlib.sha256(data(b"err", 1 << 20)).hexdigest()


def test_nothing_is_lost_when_command_exits(tmp_path):
    out_data, err_data = data(b"o", 3 << 20), data(b"e", 1 << 20)
    script = ("import hashlib, os, sys\n"
              "for d, fd in ((hashlib.shake_256(b'o').digest(3 << 20), 1), (hashlib.shake_256(b'e').digest(1 << 20), 2)):\n"
              "    while d: d = d[os.write(fd, d):]\n"
              "sys.exit(3)\n")
    out = subprocess.run([PREBIND, "--ready-log=never", "--", PYTHON, "-c", script],
                         capture_output=True, timeout=TIMEOUT)
    assert out.returncode == 3
    assert out.stdout == out_data
    assert out.stderr.startswith(err_data)
    assert b"exited before it was ready, with status 3" in out.stderr[len(err_data):]


def test_a_reader_that_does_not_read_does_not_block_prebind(start, tmp_path):
    """stdout is a pipe nobody reads: COMMAND blocks on it, as it would
    without prebind, but prebind still hears SIGTERM and exits."""
    script = ("import os, sys\n"
              "print('READY', file=sys.stderr, flush=True)\n"
              "while True: os.write(1, b'x' * 65536)\n")
    with open(tmp_path / "err", "w") as err:
        p, r = start_published(start, ["--ready-log=READY", "--", PYTHON, "-c", script], stderr=err)
        assert published(r).strip().isdigit()
        assert wait_for(lambda: pipe_full(p.proc.stdout.fileno())), "stdout never filled up"
        t0 = time.monotonic()
        p.send(signal.SIGTERM)
        assert p.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
        # The drain waits a few seconds for the reader, then gives up.
        assert time.monotonic() - t0 < 10
    # What did come through is COMMAND's bytes, uncut.
    chunk = os.read(p.proc.stdout.fileno(), 1 << 20)
    assert chunk and set(chunk) == {ord("x")}


def test_never_ready_is_124_with_its_last_lines(tmp_path):
    script = (DRAINED + "import sys\n"
              "for i in range(15): print(f'line {i}', flush=True)\n"
              "drained(1); print('last words', file=sys.stderr, flush=True)\n"
              "open(sys.argv[1], 'w').write(str(__import__('os').getpid()))\n"
              "time.sleep(60)\n")
    pidfile = tmp_path / "pid"
    out = run(["--ready-log=NEVER", "--ready-timeout=3s", "--print", "--", PYTHON, "-c", script, str(pidfile)])
    assert out.returncode == 124
    lines = out.stderr.splitlines()
    assert f"prebind: '{PYTHON}' wrote no line that matches --ready-log 'NEVER' within 3.0s; stopping it" in lines
    tail = lines[lines.index(f"prebind: last lines of '{PYTHON}':") + 1:]
    # The last 10 lines, of stdout and stderr.
    assert tail == [f"prebind: > line {i}" for i in range(6, 15)] + ["prebind: > last words"]
    # Nothing was published, and COMMAND was stopped.
    assert not re.search(r"^\d+$", out.stdout, re.M)
    assert not pid_alive(int(pidfile.read_text()))


def test_exit_before_ready_passes_its_status_and_says_why():
    out = run(["--ready-log=ready", "--print", "--", "sh", "-c", "echo 'fatal: no config' >&2; exit 3"])
    assert out.returncode == 3
    assert out.stdout == ""
    assert "prebind: 'sh' exited before it was ready, with status 3: wrote no line that matches " \
           "--ready-log 'ready'" in out.stderr
    assert "prebind: > fatal: no config" in out.stderr


# ---- --ready-exec ------------------------------------------------------------

def test_exec_probe_publishes_once_it_exits_0(start, tmp_path):
    flag = tmp_path / "flag"
    p, r = start_published(start, ["-v", f"--ready-exec=test -e {flag}", "--", PYTHON, READY_SERVER,
                                   "--ready-after", "0.7", "--flag", str(flag)])
    assert published(r).strip().isdigit()
    assert flag.exists()
    p.stop()
    assert re.search(r"ready: --ready-exec exited 0 \(attempt \d+\)", p.err)


def test_exec_probe_templates_and_environment(start, tmp_path):
    out = tmp_path / "out"
    probe = (f'test "$GREETING" = hi && test -z "$LISTEN_FDS$LISTEN_PID$NOTIFY_SOCKET" && '
             f'echo {{url}} {{web.port}} > {out}')
    p, r = start_published(start, ["-E", "GREETING=hi", "-l", "web=0", f"--ready-exec={probe}", "--",
                                   PYTHON, READY_SERVER])
    port = published(r).strip()
    assert out.read_text() == f"http://127.0.0.1:{port} {port}\n"


@pytest.mark.parametrize("name", ["my dir/s.sock", "$(touch X) `touch Y`;touch Z 'q'.sock"],
                         ids=["space", "shell-code"])
def test_exec_probe_gets_each_template_value_as_one_shell_word(start, name):
    # The values are quoted for the probe's sh -c: a socket path with a
    # space is one argument of test(1), and shell code in a path is never
    # run (X, Y, Z would appear in the working directory). A short
    # directory: pytest's tmp_path under xdist (the valgrind run) made the
    # path longer than sun_path's 108 bytes.
    work = pathlib.Path(tempfile.mkdtemp(prefix="prebind-q-"))
    try:
        path = work / name
        path.parent.mkdir(exist_ok=True)
        p, r = start_published(start, ["-l", str(path), "--ready-exec=test -S {port}", "--ready-timeout=10s", "--",
                                       "sleep", str(TIMEOUT)], cwd=work)
        assert published(r) == f"{path}\n"
        p.stop()
        assert os.listdir(work) == ([name.split("/")[0]] if "/" in name else []), os.listdir(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_exec_probe_failure_shows_its_output_and_status():
    out = run(["--ready-exec=echo '127.0.0.1:5432 - no response'; exit 2", "--ready-timeout=1s", "--",
               "sleep", "30"])
    assert out.returncode == 124
    assert re.search(r"prebind: 'sleep' did not pass --ready-exec 'echo '127\.0\.0\.1:5432 - no response'; exit 2' "
                     r"\(exited with status 2, \d+ attempts: '127\.0\.0\.1:5432 - no response'\) within 1\.0s; "
                     r"stopping it", out.stderr), out.stderr


def test_exec_probe_is_bounded_and_never_outlives_prebind():
    out = run(["--ready-exec=sleep 7.31", "--ready-interval=100ms", "--ready-timeout=2.5s", "--", "sleep", "30"])
    assert out.returncode == 124
    assert re.search(r"did not pass --ready-exec 'sleep 7\.31' \(did not finish within 1\.0s, \d+ attempts\)", out.stderr), \
        out.stderr
    assert wait_for(lambda: not processes_with("sleep 7.31"), timeout=5)


def test_exec_probe_dies_with_prebind_even_by_sigkill(start):
    p = start(["--ready-exec=sleep 7.32", "--", "sleep", "7.33"])
    assert wait_for(lambda: processes_with("sleep 7.32"))
    p.send(signal.SIGKILL)
    p.wait()
    try:
        assert wait_for(lambda: not processes_with("sleep 7.32"), timeout=5)
    finally:
        for pid in processes_with("sleep 7.33"):
            os.kill(pid, signal.SIGKILL)


# ---- --ready-http ------------------------------------------------------------

def test_http_503_for_a_second_then_200(start):
    t0 = time.monotonic()
    p, r = start_published(start, ["-v", "--ready-http=/healthz", "--", PYTHON, READY_SERVER, "--ready-after", "1"])
    port = published(r).strip()
    assert port.isdigit(), p.stderr_text()
    assert time.monotonic() - t0 >= 1.0
    status, body = http_get(f"127.0.0.1:{port}")
    assert status == 200
    p.stop()
    assert re.search(r"ready: --ready-http answered 200 \(attempt \d+\)", p.err)


@pytest.mark.parametrize("mode,reason", [
    ("--garbage", "got an answer that is not HTTP/1.x"),
    ("--reset", "failed: Connection reset by peer"),
])
def test_http_not_ready_says_why(mode, reason):
    # Long enough for Python to start on a loaded machine.
    out = run(["--ready-http", "--ready-timeout=6s", "--", PYTHON, READY_SERVER, mode])
    assert out.returncode == 124
    assert re.search(rf"did not pass --ready-http \(GET / {reason}, \d+ attempts\) within 6\.0s; stopping it", out.stderr), out.stderr


def test_http_503_until_timeout():
    out = run(["--ready-http", "--ready-timeout=6s", "--", PYTHON, READY_SERVER, "--ready-after", "30"])
    assert out.returncode == 124
    assert re.search(r"did not pass --ready-http \(GET / answered 503, \d+ attempts\)", out.stderr), out.stderr


# ---- together, and with --restart ---------------------------------------------

def test_all_conditions_must_hold(start, tmp_path):
    flag = tmp_path / "flag"
    p, r = start_published(start, ["-v", "--ready-log=^READY$", f"--ready-exec=test -e {flag}", "--ready-http",
                                   "--", PYTHON, READY_SERVER, "--ready-after", "0.8", "--line", "READY",
                                   "--flag", str(flag)])
    assert published(r).strip().isdigit()
    p.stop()
    log = p.err
    ready_at = log.index("ready: waiting-ready -> running")
    for what in ("ready: --ready-log matched 'READY'", "ready: --ready-exec exited 0",
                 "ready: --ready-http answered 200"):
        assert -1 < log.index(what) < ready_at, log


@pytest.mark.parametrize("condition", ["log", "exec", "http"])
def test_each_new_command_is_waited_for_again(start, tmp_path, condition):
    flag, once = tmp_path / "flag", tmp_path / "once"
    args = {"log": ["--ready-log=^READY$"], "exec": [f"--ready-exec=test -e {flag}"], "http": ["--ready-http"]}
    with open(tmp_path / "log", "w") as err:
        p, r = start_published(start, ["-v", "--restart=on-failure", "--restart-delay=0"] + args[condition] + [
            "--", PYTHON, READY_SERVER, "--line", "READY", "--flag", str(flag), "--exit-at-eof",
            "--once-file", str(once)], stdin=subprocess.PIPE, stderr=err)
        assert published(r).strip().isdigit()
        # The first COMMAND was ready: only now does it exit (at the end
        # of its stdin), so that a loaded machine cannot make it exit
        # before its probe passed.
        p.proc.stdin.close()
        log = lambda: (tmp_path / "log").read_text()  # noqa: E731
        assert wait_for(lambda: log().count("ready: waiting-ready -> running") >= 2), log()
        assert log().count(f"ready: --ready-{condition}") == 2, log()
        assert "restarting it" in log()
        p.stop()


# ---- bad usage -----------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--ready-log=("], "prebind: --ready-log: '(': "),
    (["--ready-log=a{2,1}"], "prebind: --ready-log: 'a{2,1}': "),
    (["--ready-log=(x+)\\1$"], "prebind: --ready-log: '(x+)\\1$': back-references (\\1 to \\9) are not supported"),
    (["-l", "/tmp/prebind-ready-unix-only.sock", "--ready-http"], "prebind: --ready-http needs a TCP socket"),
    (["-l", "udp:0", "--ready-http"], "prebind: --ready-http needs a TCP socket"),
    (["--ready-http=healthz"], "prebind: --ready-http: 'healthz': expected a path from '/'"),
    (["--ready-exec=echo {nope}"], "prebind: --ready-exec: 'echo {nope}': unknown field"),
    (["--ready-exec=echo {9.port}"], "prebind: --ready-exec: 'echo {9.port}': no socket of that name or index"),
    (["--ready-exec=if x; then {"], "prebind: --ready-exec: 'if x; then {': bad template"),
])
def test_bad_options_are_125_with_one_line(args, message):
    out = run(args + ["--", "sh", "-c", "echo ran"])
    assert out.returncode == 125
    assert out.stdout == ""
    assert out.stderr.startswith(message) and out.stderr.count("\n") == 1, out.stderr
    assert not os.path.exists("/tmp/prebind-ready-unix-only.sock")

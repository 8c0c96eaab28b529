"""Publishing: every format through the real binary, the port file's
life cycle and atomicity, --port-fd, and ordering on stdout."""

import json
import os
import shlex
import signal
import subprocess
import threading

import pytest

from conftest import PREBIND, PROBE, PYTHON, TIMEOUT, curl, run, server, wait_for


def probe_sockets(report):
    return {f["fd"]: f for f in report["fds"] if f["type"].startswith("sock")}


def run_with_probe(args, **kwargs):
    out = run(["-q", *args, "--", PROBE], **kwargs)
    assert out.returncode == 0, out.stderr
    *published, probe_line = out.stdout.splitlines()
    return published, json.loads(probe_line)


def test_print_comes_before_command_output_and_matches_the_socket():
    published, report = run_with_probe(["--print", "-l", "0", "-l", "[::1]:0"])
    socks = probe_sockets(report)
    assert published == [str(socks[3]["port"]), str(socks[4]["port"])]


def test_format_addr_and_url():
    published, report = run_with_probe(["--print=addr", "-l", "0", "-l", "[::1]:0", "-l", "udp:0", "-l", "@pb-t"])
    s = probe_sockets(report)
    assert published == [f"127.0.0.1:{s[3]['port']}", f"[::1]:{s[4]['port']}", f"127.0.0.1:{s[5]['port']}",
                         "@pb-t"]
    published, report = run_with_probe(["--print=url", "-l", "0", "-l", "[::1]:0", "-l", "udp:0", "-l", "@pb-t"])
    s = probe_sockets(report)
    assert published == [f"http://127.0.0.1:{s[3]['port']}", f"http://[::1]:{s[4]['port']}",
                         f"udp://127.0.0.1:{s[5]['port']}", "unix:@pb-t"]


def test_wildcard_is_published_as_bound_and_url_is_loopback():
    published, report = run_with_probe(["--print=json", "-l", "*:0"])
    sock = json.loads(published[0])["sockets"][0]
    assert sock["address"] == "0.0.0.0"
    assert sock["url"] == f"http://127.0.0.1:{sock['port']}"


def test_json_is_one_line_with_every_field(tmp_path):
    published, report = run_with_probe(["--print=json", "-l", "web=0", "-l", f"ctl={tmp_path}/ctl.sock",
                                        "-l", "dns=udp:[::1]:0"])
    assert len(published) == 1
    doc = json.loads(published[0])
    s = probe_sockets(report)
    assert doc["child_pid"] == report["pid"] and doc["pid"] == report["ppid"]
    assert doc["sockets"] == [
        {"fd": 3, "name": "web", "family": "ipv4", "type": "stream", "address": "127.0.0.1",
         "port": s[3]["port"], "url": f"http://127.0.0.1:{s[3]['port']}"},
        {"fd": 4, "name": "ctl", "family": "unix", "type": "stream", "address": f"{tmp_path}/ctl.sock",
         "port": None, "url": f"unix:{tmp_path}/ctl.sock"},
        {"fd": 5, "name": "dns", "family": "ipv6", "type": "dgram", "address": "::1",
         "port": s[5]["port"], "url": f"udp://[::1]:{s[5]['port']}"},
    ]


def test_json_of_a_path_that_is_not_utf8_is_valid_and_gives_the_bytes_back(tmp_path):
    # A unix path is bytes: \xff and a Latin-1 \xe9 are no UTF-8. json
    # stays UTF-8 (each such byte as \udcXX: json.loads then os.fsencode
    # give the path back); port, addr and url write the bytes as they are;
    # env single-quotes them for the shell.
    path = os.fsencode(tmp_path) + b"/caf\xe9-\xff-\xc3\xa9.sock"
    out = subprocess.run([PREBIND, "--print=json", "-l", path, "--", "true"], capture_output=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.decode("utf-8"))  # strict: valid UTF-8
    sock = doc["sockets"][0]
    assert os.fsencode(sock["address"]) == path
    assert os.fsencode(sock["url"]) == b"unix:" + path
    for fmt, want in (("port", path), ("addr", path), ("url", b"unix:" + path)):
        out = subprocess.run([PREBIND, f"--print={fmt}", "-l", path, "--", "true"], capture_output=True,
                             timeout=TIMEOUT)
        assert out.stdout == want + b"\n", fmt
    out = subprocess.run([PREBIND, "--print=env", "-l", path, "--", "true"], capture_output=True, timeout=TIMEOUT)
    assert b"PREBIND_PORT='" + path + b"'\n" in out.stdout, out.stdout


def test_env_format_is_sourced_by_a_shell_and_a_client_reaches_the_server(tmp_path, start):
    envfile = tmp_path / "ci.env"
    p = start(["--format=env", f"--port-file={envfile}", "-l", "web=0", "--", PYTHON, server("stdlib_http.py")])
    assert wait_for(envfile.exists)
    text = envfile.read_text()
    assert "PREBIND_PORT=" in text and "PREBIND_WEB_URL=http://127.0.0.1:" in text
    # Source it as a CI step would, then use it.
    out = subprocess.run(["bash", "-c", f"set -a; . {shlex.quote(str(envfile))}; curl -sS --max-time 10 "
                          "\"$PREBIND_WEB_URL/env\"; echo $PREBIND_PORT $PREBIND_PID"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    body, ids = out.stdout.splitlines()
    assert body.startswith("stdlib pid=")
    port, pid = ids.split()
    assert int(pid) == p.pid and int(port) > 0
    assert p.stop() == 128 + signal.SIGTERM
    assert not envfile.exists()


def test_env_format_quotes_only_what_a_shell_needs(tmp_path):
    path = tmp_path / "it's here.sock"
    out = run(["--print=env", "-l", f"sock={path}", "--", "true"])
    line = [l for l in out.stdout.splitlines() if l.startswith("PREBIND_SOCK_ADDR=")][0]
    value = subprocess.run(["bash", "-c", f"{line}; printf %s \"$PREBIND_SOCK_ADDR\""], capture_output=True,
                           text=True, timeout=TIMEOUT).stdout
    assert value == str(path)
    assert "PREBIND_URL=http" not in out.stdout and "PREBIND_URL='unix:" in out.stdout


def test_port_file_lifecycle_normal_exit(tmp_path, start):
    pf = tmp_path / "port"
    p = start([f"--port-file={pf}", "--", PROBE, "--sleep", "1"])
    report = json.loads(p.readline())
    assert pf.read_text() == f"{probe_sockets(report)[3]['port']}\n"
    assert p.wait() == 0
    assert not pf.exists()
    assert os.listdir(tmp_path) == []  # no temporary file left either


@pytest.mark.parametrize("how", ["sigterm", "crash"])
def test_port_file_removed_when_command_dies(tmp_path, start, how):
    pf = tmp_path / "port"
    p = start([f"--port-file={pf}", "--", "sh", "-c", "sleep 0.3; kill -s SEGV $$" if how == "crash"
               else f"exec sleep {TIMEOUT}"])
    assert wait_for(pf.exists)
    if how == "sigterm":
        p.send(signal.SIGTERM)
        assert p.wait() == 128 + signal.SIGTERM
    else:
        assert p.wait() == 128 + signal.SIGSEGV
    assert not pf.exists()
    assert os.listdir(tmp_path) == []


def test_port_file_is_never_partial_to_a_concurrent_reader(tmp_path):
    # Many sockets make a long JSON document; a reader polling as fast as
    # it can must see no file or the whole document, never a part.
    pf = tmp_path / "port.json"
    args = ["-q", "--format=json", f"--port-file={pf}"] + ["-l", "0"] * 40 + ["--", "true"]
    seen, bad, stop = [0], [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                text = pf.read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            seen[0] += 1
            try:
                if len(json.loads(text)["sockets"]) != 40:
                    bad.append(text)
            except ValueError:
                bad.append(text)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(60):
            assert run(args).returncode == 0
    finally:
        stop.set()
        t.join(TIMEOUT)
    assert bad == []
    assert seen[0] > 0  # the reader did see the file at least once
    assert not pf.exists()


def test_port_file_replaced_by_someone_else_is_not_removed(tmp_path, start):
    pf = tmp_path / "port"
    p = start([f"--port-file={pf}", "--", "sleep", str(TIMEOUT)])
    assert wait_for(pf.exists)
    pf.unlink()
    pf.write_text("not prebind's\n")
    assert p.stop() == 128 + signal.SIGTERM
    assert pf.read_text() == "not prebind's\n"


def test_port_fd_pipe_gets_the_addresses_and_eof_while_command_runs(start):
    r, w = os.pipe()
    p = start([f"--port-fd={w}", "--format=url", "--", "sleep", str(TIMEOUT)], pass_fds=(w,))
    os.close(w)
    data = b""
    while True:  # EOF proves prebind closed its copy; the child never had one
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    assert data.decode().startswith("http://127.0.0.1:")
    assert p.proc.poll() is None
    assert p.stop() == 128 + signal.SIGTERM


def test_without_publishing_option_logs_on_stderr_and_q_silences():
    out = run(["-l", "web=0", "--", "true"])
    assert out.stdout == ""
    assert out.stderr.startswith("prebind: listening on http://127.0.0.1:") and "name 'web'" in out.stderr
    assert run(["-q", "--", "true"]).stderr == ""


@pytest.mark.parametrize("mode", [[], ["--exec"]])
def test_print_to_a_closed_pipe_is_an_error_and_nothing_runs(tmp_path, mode):
    marker = tmp_path / "ran"
    r, w = os.pipe()
    os.close(r)
    try:
        out = subprocess.run([PREBIND, *mode, "--print", "--", "touch", str(marker)], stdout=w,
                             stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    finally:
        os.close(w)
    assert out.returncode == 125
    assert out.stderr == "prebind: cannot write the addresses to stdout: Broken pipe\n"
    assert not marker.exists()


def test_curl_through_port_file(tmp_path, start):
    pf = tmp_path / "url"
    start(["--format=url", f"--port-file={pf}", "--", PYTHON, server("stdlib_http.py")])
    assert wait_for(pf.exists)
    assert curl(pf.read_text().strip()).startswith("stdlib pid=")

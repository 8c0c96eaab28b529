"""Sockets of every kind at once, with names, taken by a real consumer;
socket options; unix socket files created, replaced and left alone."""

import json
import os
import signal
import socket
import stat
import subprocess

from conftest import EXAMPLE_C_SERVER, PYTHON, TIMEOUT, http_get, run, wait_for


def test_tcp4_tcp6_unix_udp_named_sockets_in_one_server(start, tmp_path):
    path = tmp_path / "web.sock"
    p = start(["--print=json", "-l", "web=127.0.0.1:0", "-l", "web6=[::1]:0", "-l", f"local={path}",
               "-l", "dns=udp:127.0.0.1:0", "-l", "abs=@prebind-test-" + str(os.getpid()),
               "--", EXAMPLE_C_SERVER, "--expect", "web:stream:ipv4", "--expect", "web6:stream:ipv6",
               "--expect", "local:stream:unix", "--expect", "dns:dgram:ipv4", "--expect", "abs:stream:unix"])
    doc = json.loads(p.readline())
    names = [s["name"] for s in doc["sockets"]]
    assert names == ["web", "web6", "local", "dns", "abs"]
    for sock in doc["sockets"]:
        if sock["type"] == "stream":
            status, body = http_get(sock["url"])
            assert status == 200 and f"fd={sock['fd']} name={sock['name']}" in body, body
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.settimeout(TIMEOUT)
    udp.sendto(b"ping", ("127.0.0.1", doc["sockets"][3]["port"]))
    assert udp.recvfrom(100)[0] == b"echo:ping"
    udp.close()
    assert stat.S_ISSOCK(path.lstat().st_mode)
    assert p.stop() == 0
    assert not path.exists()  # the socket file prebind created is gone


def getsockopt_in_command(args, level, option):
    """COMMAND reads an option of fd 3 itself."""
    code = (f"import socket; s = socket.socket(fileno=3); "
            f"print(s.getsockopt({level}, {option}))")
    out = run(["-q", *args, "--", PYTHON, "-c", code])
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_reuseaddr_on_tcp_and_reuseport_opt_in():
    assert getsockopt_in_command([], "socket.SOL_SOCKET", "socket.SO_REUSEADDR") == 1
    assert getsockopt_in_command([], "socket.SOL_SOCKET", "socket.SO_REUSEPORT") == 0
    assert getsockopt_in_command(["--reuseport"], "socket.SOL_SOCKET", "socket.SO_REUSEPORT") == 1


def test_reuseport_lets_a_second_listener_share_the_port(start):
    for reuse, expect_ok in ((["--reuseport"], True), ([], False)):
        p = start(["--print", *reuse, "--", "sleep", str(TIMEOUT)])
        port = int(p.readline())
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind(("127.0.0.1", port))
            ok = True
        except OSError:
            ok = False
        finally:
            s.close()
        assert ok == expect_ok
        p.stop()


def test_v6only_and_dual_stack(start):
    assert getsockopt_in_command(["-l", "[::]:0"], "socket.IPPROTO_IPV6", "socket.IPV6_V6ONLY") == 0
    assert getsockopt_in_command(["--v6only", "-l", "[::]:0"], "socket.IPPROTO_IPV6", "socket.IPV6_V6ONLY") == 1
    for v6only, reachable in ((["--v6only"], False), ([], True)):
        p = start(["--print", *v6only, "-l", "[::]:0", "--", "sleep", str(TIMEOUT)])
        port = int(p.readline())
        c = socket.socket()
        c.settimeout(TIMEOUT)
        assert (c.connect_ex(("127.0.0.1", port)) == 0) == reachable
        c.close()
        p.stop()


def test_backlog_is_applied(start):
    p = start(["--print", "--backlog=7", "--", "sleep", str(TIMEOUT)])
    port = int(p.readline())
    ss = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=TIMEOUT)
    # For a listening socket, ss shows the backlog as Send-Q.
    assert ss.stdout.split()[2] == "7", ss.stdout
    p.stop()


def test_unix_socket_mode(tmp_path):
    for args, mode in (([], 0o666), (["--socket-mode=0600"], 0o600), (["--socket-mode=660"], 0o660)):
        path = tmp_path / "s"
        out = run(["-q", *args, "-l", str(path), "--", "stat", "-c", "%a", str(path)])
        assert out.returncode == 0, out.stderr
        assert int(out.stdout, 8) == mode
        assert not path.exists()


def test_stale_socket_is_replaced(tmp_path):
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: stale
    assert stat.S_ISSOCK(path.lstat().st_mode)
    out = run(["-q", "-l", str(path), "--", "true"])
    assert out.returncode == 0, out.stderr
    assert not path.exists()


def test_live_socket_is_never_clobbered(tmp_path):
    path = tmp_path / "live.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen()
    try:
        out = run(["-q", "-l", str(path), "--", "true"])
        assert out.returncode == 125
        assert out.stderr == f"prebind: cannot listen on '{path}': Address already in use\n"
        c = socket.socket(socket.AF_UNIX)
        c.connect(str(path))  # still the original listener
        c.close()
    finally:
        s.close()


def test_regular_file_symlink_and_directory_are_never_clobbered(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep me")
    link = tmp_path / "link"
    link.symlink_to(f)
    d = tmp_path / "dir"
    d.mkdir()
    for target in (f, link, d):
        out = run(["-q", "-l", str(target), "--", "true"])
        assert out.returncode == 125
        assert out.stderr == (f"prebind: cannot listen on '{target}': "
                              "the path exists and is not a socket (left alone)\n")
    assert f.read_text() == "keep me" and link.is_symlink() and d.is_dir()


def test_socket_file_replaced_by_someone_else_is_not_removed(tmp_path, start):
    path = tmp_path / "s"
    p = start(["--print", "-l", str(path), "--", "sleep", str(TIMEOUT)])
    p.readline()
    path.unlink()
    path.write_text("theirs")
    p.stop()
    assert path.read_text() == "theirs"


def test_localhost_and_explicit_loopback_forms():
    out = run(["--print=addr", "-l", "localhost:0", "-l", "127.0.0.2:0", "-l", "tcp:0", "--", "true"])
    lines = out.stdout.splitlines()
    assert [l.rsplit(":", 1)[0] for l in lines] == ["127.0.0.1", "127.0.0.2", "127.0.0.1"]
    assert all(0 < int(l.rsplit(":", 1)[1]) < 65536 for l in lines)


def test_explicit_port_is_used(start):
    # Not a fixed port: take one the kernel just gave, then ask for it.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = run(["--print", "-l", str(port), "--", "true"])
    if out.returncode == 125:  # someone took it meanwhile (that is the race!)
        assert "Address already in use" in out.stderr
    else:
        assert out.stdout == f"{port}\n"

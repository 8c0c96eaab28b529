"""--accept (and --inetd): a COMMAND per connection, as systemd's
Accept=yes and inetd; the listening socket on stdin without --accept."""

import os
import socket
import signal
import threading
import time

from conftest import PYTHON, TIMEOUT, children, http_get, pid_alive, run, server, wait_for

HTTP_ON_FD3 = ('read line <&3; printf "HTTP/1.0 200 OK\\r\\n\\r\\nremote=%s:%s fds=%s names=%s pid=%s self=%s\\n" '
               '"$REMOTE_ADDR" "$REMOTE_PORT" "$LISTEN_FDS" "$LISTEN_FDNAMES" "$LISTEN_PID" "$$" >&3')


def echo(port, payload, timeout=TIMEOUT):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    return data


def test_fd3_connection_with_protocol_and_peer_variables(start):
    p = start(["--accept", "--print=url", "--", "sh", "-c", HTTP_ON_FD3])
    url = p.readline()
    c = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=TIMEOUT)
    c.sendall(b"GET / HTTP/1.0\n")  # one line: the handler reads exactly that
    c.shutdown(socket.SHUT_WR)
    body = b""
    while chunk := c.recv(4096):
        body += chunk
    local_port = c.getsockname()[1]
    c.close()
    text = body.decode()
    assert f"remote=127.0.0.1:{local_port} fds=1 names=connection" in text, text
    fields = dict(f.split("=") for f in text.split("\r\n\r\n")[1].split())
    assert fields["pid"] == fields["self"]  # LISTEN_PID is the handler's own pid
    assert p.stop() == 0


def test_inetd_cat_echo_1000_sequential_connections(start):
    p = start(["--accept", "--inetd", "--print", "--", "cat"])
    port = int(p.readline())
    for i in range(1000):
        payload = f"hello {i}\n".encode()
        assert echo(port, payload) == payload
    assert wait_for(lambda: children(p.pid) == [])  # every handler reaped at once
    assert p.stop() == 0


def test_burst_of_100_concurrent_connections_all_answered_no_zombie(start):
    p = start(["--accept", "--inetd", "--max-connections=200", "--print", "--", "cat"])
    port = int(p.readline())
    results, errors = {}, []

    def client(i):
        try:
            results[i] = echo(port, f"burst {i}\n".encode())
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert errors == []
    assert results == {i: f"burst {i}\n".encode() for i in range(100)}
    assert wait_for(lambda: children(p.pid) == [])
    assert p.stop() == 0


def test_max_connections_holds_and_the_rest_wait_in_the_backlog(start, tmp_path):
    p = start(["--accept", "--inetd", "--max-connections=2", "--print", "--", "sh", "-c",
               "cat >/dev/null; sleep 0.3; echo done"])
    port = int(p.readline())
    peak, stop, answers = [0], threading.Event(), []

    def watch():
        # A sample every 5 ms (each handler lives 300 ms) until the
        # clients are done.
        while not stop.wait(0.005):
            peak[0] = max(peak[0], len(children(p.pid)))

    def client():
        answers.append(echo(port, b"x"))

    w = threading.Thread(target=watch)
    w.start()
    clients = [threading.Thread(target=client) for _ in range(8)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(TIMEOUT)
    stop.set()
    w.join()
    assert answers == [b"done\n"] * 8  # all served, none refused
    assert peak[0] == 2
    assert p.stop() == 0


def test_sigterm_stops_accepting_and_ends_the_handlers(start):
    p = start(["--accept", "--inetd", "--print", "--", "sleep", str(TIMEOUT)])
    port = int(p.readline())
    conns = [socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) for _ in range(3)]
    assert wait_for(lambda: len(children(p.pid)) == 3)
    handlers = [int(c) for c in children(p.pid)]
    t0 = time.monotonic()
    p.send(signal.SIGTERM)
    assert p.wait() == 0
    assert time.monotonic() - t0 < TIMEOUT / 2
    assert not any(pid_alive(h) for h in handlers)
    for c in conns:
        c.close()
    s = socket.socket()
    assert s.connect_ex(("127.0.0.1", port)) != 0  # the socket is closed: refused
    s.close()


def test_handler_not_found_or_not_executable_fails_at_start(tmp_path):
    # COMMAND is looked up once, before the first connection.
    out = run(["--accept", "--print", "--", "prebind-no-such-handler"])
    assert out.returncode == 127
    assert out.stderr.endswith("prebind: cannot run 'prebind-no-such-handler': No such file or directory\n")
    script = tmp_path / "handler"
    script.write_text("#!/bin/sh\necho hi\n")
    out = run(["-q", "--accept", "--", str(script)])
    assert out.returncode == 126 and "Permission denied" in out.stderr
    out = run(["-q", "--accept", "-E", f"PATH={tmp_path}", "--", "handler"])  # COMMAND's PATH is searched
    assert out.returncode == 126 and "Permission denied" in out.stderr


def test_handler_exec_failure_is_reported_and_prebind_goes_on(start, tmp_path):
    handler = tmp_path / "handler"
    handler.write_text("#!/bin/sh\necho hi\n")
    handler.chmod(0o755)
    p = start(["--accept", "--inetd", "--print", "--", str(handler)])
    port = int(p.readline())
    assert echo(port, b"") == b"hi\n"
    handler.chmod(0o644)  # breaks after the start: reported per connection
    for _ in range(2):
        try:
            assert echo(port, b"") == b""
        except ConnectionResetError:
            pass
    handler.chmod(0o755)
    assert echo(port, b"") == b"hi\n"  # still accepting
    assert p.stop() == 0
    assert p.err.count(f"cannot run '{handler}': Permission denied") == 2


def test_inetd_wait_mode_listening_socket_on_stdin(start):
    p = start(["--inetd", "--print=url", "--", PYTHON, server("inetd_wait.py")])
    url = p.readline()
    for _ in range(3):
        status, body = http_get(url)
        assert status == 200 and body.startswith("inetd-wait pid=")
    assert p.stop() == 128 + signal.SIGTERM


def test_accept_conflicts_are_usage_errors():
    for args, fragment in ((["--accept", "--ready"], "cannot be combined with --ready"),
                           (["--accept", "--restart=always"], "cannot be combined with --ready or --restart"),
                           (["--accept", "-l", "udp:0"], "stream sockets only"),
                           (["--inetd", "-l", "0", "-l", "0"], "passes one socket"),
                           (["--accept", "--exec"], "--accept needs the supervisor")):
        out = run([*args, "--", "true"])
        assert out.returncode == 125 and fragment in out.stderr, (args, out.stderr)

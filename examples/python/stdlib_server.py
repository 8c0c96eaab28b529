"""An HTTP server from Python's standard library that never binds: it takes
its listening socket from prebind (or systemd) as fd 3.

    prebind --print=url -- python3 stdlib_server.py

SIGTERM (forwarded by prebind) stops it with status 0.
"""

import http.server
import os
import signal
import socket
import sys

LISTEN_FDS_START = 3  # SD_LISTEN_FDS_START


def take_listening_socket():
    """The first socket passed by socket activation, as sd_listen_fds(3)
    reads the protocol: LISTEN_PID must be our pid, or the sockets are not
    for us (a wrapper such as `sh -c` sits between prebind and us)."""
    pid, fds = os.environ.get("LISTEN_PID"), os.environ.get("LISTEN_FDS")
    if pid != str(os.getpid()):
        sys.exit(f"stdlib_server: LISTEN_PID={pid} is not my pid {os.getpid()}: "
                 "run me directly or with `exec`, not through a wrapper")
    if not fds or int(fds) < 1:
        sys.exit("stdlib_server: no sockets passed (LISTEN_FDS)")
    # The variables are ours alone: anything we start must not take them.
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    # The fd arrives inheritable; the receiver sets close-on-exec itself.
    os.set_inheritable(LISTEN_FDS_START, False)
    return socket.socket(fileno=LISTEN_FDS_START)  # family and type are detected


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"stdlib pid={os.getpid()} path={self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        sys.stderr.write("stdlib_server: " + format % args + "\n")


def stop(signum, frame):
    raise SystemExit(0)


def main():
    sock = take_listening_socket()
    signal.signal(signal.SIGTERM, stop)
    server = http.server.ThreadingHTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()  # the unbound socket the constructor made
    server.socket = sock
    server.daemon_threads = True
    with server:
        server.serve_forever()


if __name__ == "__main__":
    main()

"""A server that serves HTTP on fd 3 and talks sd_notify(3) by a script
given as arguments, so tests can play any readiness story:

    notify_server.py sleep:1.5 'send:READY=1\\nSTATUS=up' sleep:30 exit:0
    notify_server.py wait:/path/of/a/file send:READY=1

It implements the client side of the protocol itself (a datagram to
NOTIFY_SOCKET, '@' for an abstract name), as sd_notify() does."""

import http.server
import os
import socket
import sys
import threading
import time


def notify(message):
    address = os.environ["NOTIFY_SOCKET"]
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(message.encode(), address)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"notify_server pid={os.getpid()}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve():
    sock = socket.socket(fileno=3)
    srv = http.server.HTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    srv.socket = sock
    srv.serve_forever()


def main(steps):
    threading.Thread(target=serve, daemon=True).start()
    for step in steps:
        verb, _, arg = step.partition(":")
        if verb == "sleep":
            time.sleep(float(arg))
        elif verb == "wait":
            # Until the test creates the file: a step ordered by the test,
            # not by a time that a loaded machine stretches.
            deadline = time.monotonic() + 120
            while not os.path.exists(arg) and time.monotonic() < deadline:
                time.sleep(0.01)
        elif verb == "send":
            notify(arg.replace("\\n", "\n"))
        elif verb == "exit":
            sys.exit(int(arg))
        else:
            sys.exit(f"notify_server: bad step {step!r}")
    time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])

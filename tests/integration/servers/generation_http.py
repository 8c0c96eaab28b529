"""An HTTP server on fd 3 for reload tests (issue 24). Each start takes
the next generation number from STATE/generation, needs --start-delay
seconds before it is ready (it accepts nothing before), then says so:
READY=1 when it has a NOTIFY_SOCKET, and a line "generation N ready" on
stderr. It answers "generation=N ready=1 pid=P", and on SIGTERM finishes
the request in hand and exits 0 (a graceful drain).

    generation_http.py STATE [--start-delay SECONDS]

A file STATE/crash makes a new generation exit 3 at start (after a line
saying so); STATE/hang makes it never get ready. SIGUSR1 makes a ready
one say it again: READY=1 with a STATUS= line, and its ready line.
"""

import argparse
import http.server
import os
import signal
import socket
import sys
import time

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def next_generation(state):
    path = os.path.join(state, "generation")
    try:
        n = int(open(path).read() or 0) + 1
    except FileNotFoundError:
        n = 1
    with open(path + ".tmp", "w") as f:
        f.write(str(n))
    os.rename(path + ".tmp", path)
    return n


def notify(message):
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(message.encode(), address)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("state")
    parser.add_argument("--start-delay", type=float, default=1.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    generation = next_generation(args.state)
    print(f"generation {generation} starting", file=sys.stderr, flush=True)
    if os.path.exists(os.path.join(args.state, "crash")):
        print(f"generation {generation}: cannot start, crashing", file=sys.stderr, flush=True)
        sys.exit(3)
    deadline = time.monotonic() + args.start_delay
    while not stop and (time.monotonic() < deadline or os.path.exists(os.path.join(args.state, "hang"))):
        time.sleep(0.02)
    if stop:
        return
    body = f"generation={generation} ready=1 pid={os.getpid()}\n".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    def again(*_):
        notify(f"READY=1\nSTATUS=generation {generation} says hello")
        print(f"generation {generation} ready", file=sys.stderr, flush=True)

    signal.signal(signal.SIGUSR1, again)
    sock = socket.socket(fileno=3)
    srv = http.server.HTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    srv.socket = sock
    srv.timeout = 0.05
    notify("READY=1")
    print(f"generation {generation} ready", file=sys.stderr, flush=True)
    while not stop:
        srv.handle_request()  # one whole request, or the timeout


if __name__ == "__main__":
    main()

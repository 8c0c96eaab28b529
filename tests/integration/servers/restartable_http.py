"""An HTTP server on fd 3 for restart tests: it answers with its pid,
stops gracefully on SIGTERM (the request in hand is finished first), and
can crash on purpose:

    restartable_http.py [--crash-after N] [--count-starts FILE]
"""

import argparse
import http.server
import os
import signal
import socket

stop = False
served = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        body = f"pid={os.getpid()}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        global served
        served += 1

    def log_message(self, *args):
        pass


def on_term(signum, frame):
    global stop
    stop = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-after", type=int, default=0)
    parser.add_argument("--count-starts")
    args = parser.parse_args()
    if args.count_starts:
        with open(args.count_starts, "a") as f:
            f.write(f"{os.getpid()}\n")
    signal.signal(signal.SIGTERM, on_term)
    sock = socket.socket(fileno=3)
    srv = http.server.HTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    srv.socket = sock
    srv.timeout = 0.1
    while not stop:
        srv.handle_request()  # one whole request, or the timeout
        if args.crash_after and served >= args.crash_after:
            os.kill(os.getpid(), signal.SIGSEGV)  # a crash, after answering


if __name__ == "__main__":
    main()

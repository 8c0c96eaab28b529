"""A server for the --ready-* tests, that becomes ready in ways it is
told: an HTTP server on fd 3 (503 until --ready-after seconds have
passed, then 200), a line on stdout or stderr, a file to create.

    ready_server.py [--ready-after S] [--line TEXT] [--stream out|err]
                    [--no-newline] [--flag PATH] [--exit-at-eof --exit-status N]
                    [--once-file PATH] [--garbage] [--reset]

--exit-at-eof: once ready, exit with --exit-status (removing --flag
first) when stdin reaches end of file: the test decides when, by closing
it, so that the exit comes after what the test waited for however loaded
the machine is (a fixed time could pass before a probe even started).
--once-file: --exit-at-eof applies only while PATH does not exist (the
first run of a restarted COMMAND creates it)."""

import argparse
import http.server
import os
import socket
import sys
import threading
import time

T0 = time.monotonic()
a = argparse.ArgumentParser()
a.add_argument("--ready-after", type=float, default=0)
a.add_argument("--line")
a.add_argument("--stream", default="out")
a.add_argument("--no-newline", action="store_true")
a.add_argument("--flag")
a.add_argument("--exit-at-eof", action="store_true")
a.add_argument("--exit-status", type=int, default=1)
a.add_argument("--once-file")
a.add_argument("--garbage", action="store_true", help="answer every request with a non-HTTP line")
a.add_argument("--reset", action="store_true", help="close every connection without a word")
args = a.parse_args()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready = time.monotonic() - T0 >= args.ready_after
        body = f"{'ok' if ready else 'starting'} pid={os.getpid()}\n".encode()
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def serve_raw(listener):
    while True:
        c, _ = listener.accept()
        if args.garbage:
            c.sendall(b"-ERR unknown command\r\n")
        c.close()


listener = socket.socket(fileno=3)
if args.garbage or args.reset:
    threading.Thread(target=serve_raw, args=(listener,), daemon=True).start()
else:
    srv = http.server.HTTPServer(listener.getsockname()[:2], Handler, bind_and_activate=False)
    srv.socket = listener
    threading.Thread(target=srv.serve_forever, daemon=True).start()

first_run = not (args.once_file and os.path.exists(args.once_file))
if args.once_file:
    open(args.once_file, "a").close()

if args.ready_after:
    time.sleep(args.ready_after)
if args.flag:
    with open(args.flag, "w") as f:
        f.write(str(os.getpid()))
if args.line is not None:
    out = sys.stdout if args.stream == "out" else sys.stderr
    out.write(args.line + ("" if args.no_newline else "\n"))
    out.flush()

if args.exit_at_eof and first_run:
    while sys.stdin.buffer.read(4096):
        pass
    if args.flag:
        os.unlink(args.flag)
    sys.exit(args.exit_status)
while True:
    time.sleep(3600)

"""A stdlib HTTP server that takes its listening socket from fd 3, as
passed by prebind (or systemd): socket.socket(fileno=3)."""

import http.server
import os
import socket
import sys


def check_protocol():
    # The protocol as sd_listen_fds(3) reads it: LISTEN_PID must be us.
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        sys.exit(f"stdlib_http: LISTEN_PID={os.environ.get('LISTEN_PID')} is not {os.getpid()}")
    if int(os.environ.get("LISTEN_FDS", "0")) < 1:
        sys.exit("stdlib_http: no LISTEN_FDS")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (f"stdlib pid={os.getpid()} path={self.path} "
                f"greeting={os.environ.get('GREETING', '')} argv={' '.join(sys.argv[1:])}\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    check_protocol()
    sock = socket.socket(fileno=3)
    srv = http.server.HTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    srv.socket = sock
    srv.serve_forever()


if __name__ == "__main__":
    main()

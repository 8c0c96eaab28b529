"""An HTTP server that binds its own port, as most servers do (for
--intercept): it knows nothing of prebind. Answers "pid=PID token=TOKEN",
one request at a time, and stops gracefully on SIGTERM (the request in
hand is finished first)."""

import argparse
import http.server
import os
import signal
import socket


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--token", default="")
    ap.add_argument("--say-before-bind", default=None)
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"pid={os.getpid()} token={args.token}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    class Server(http.server.HTTPServer):
        address_family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        timeout = 0.2

    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(True))
    if args.say_before_bind:
        print(args.say_before_bind, flush=True)
    with Server((args.host, args.port), Handler) as httpd:
        while not stop:
            httpd.handle_request()


if __name__ == "__main__":
    main()

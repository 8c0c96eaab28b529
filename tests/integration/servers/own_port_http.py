"""An HTTP server that binds its own port, as most servers do (for
--intercept): it knows nothing of prebind. Answers "pid=PID token=TOKEN
via=bind", one request at a time, and stops gracefully on SIGTERM (the
request in hand is finished first). With --sd-listen-fds it first looks
for inherited sockets as sd_listen_fds(3) does (LISTEN_PID its own,
LISTEN_FDS at least 1) and serves on fd 3 when there is one, without any
bind() ("via=listen_fds"): many databases and Go services do that."""

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
    ap.add_argument("--sd-listen-fds", action="store_true")
    args = ap.parse_args()
    inherited = (args.sd_listen_fds and os.environ.get("LISTEN_PID") == str(os.getpid())
                 and int(os.environ.get("LISTEN_FDS", "0")) >= 1)
    via = "listen_fds" if inherited else "bind"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"pid={os.getpid()} token={args.token} via={via}\n".encode()
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
    if inherited:
        httpd = Server((args.host, args.port), Handler, bind_and_activate=False)
        httpd.socket.close()
        httpd.socket = socket.socket(fileno=3)
    else:
        httpd = Server((args.host, args.port), Handler)
    with httpd:
        while not stop:
            httpd.handle_request()


if __name__ == "__main__":
    main()

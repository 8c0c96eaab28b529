"""A server that must know its own address: it puts its public URL in
its answers (think OAuth callback URLs, links in e-mails, CORS origins).
It still takes its socket from prebind (fd 3): the port is never free for
another process to take.

    server.py --config app.conf        # port and public_url from a config file
    server.py --public-url URL         # or on the command line

With --config, the port in the file must be the socket's: a config that
disagrees is an error (exit 2), not a silent mismatch.
"""

import argparse
import configparser
import http.server
import os
import signal
import socket
import sys

LISTEN_FDS_START = 3


def take_listening_socket():
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        sys.exit(f"server.py: LISTEN_PID={os.environ.get('LISTEN_PID')} is not my pid {os.getpid()}: "
                 "start me directly or with exec")
    if int(os.environ.get("LISTEN_FDS", "0")) < 1:
        sys.exit("server.py: no sockets passed (LISTEN_FDS)")
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    os.set_inheritable(LISTEN_FDS_START, False)
    return socket.socket(fileno=LISTEN_FDS_START)


def main():
    parser = argparse.ArgumentParser(prog="server.py")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--config", help="an ini file with [server] port and public_url")
    group.add_argument("--public-url")
    args = parser.parse_args()

    sock = take_listening_socket()
    port = sock.getsockname()[1]
    settings = {"public_url": args.public_url, "port": str(port)}
    config_text = ""
    if args.config:
        with open(args.config) as f:
            config_text = f.read()
        config = configparser.ConfigParser(interpolation=None)
        config.read_string(config_text, source=args.config)
        settings = dict(config["server"])
        if settings.get("port") != str(port):
            print(f"server.py: {args.config} says port {settings.get('port')}, "
                  f"but my socket is on port {port}", file=sys.stderr)
            sys.exit(2)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/config":
                body = config_text
            else:
                body = "".join(f"{k}={v}\n" for k, v in sorted(settings.items()))
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):  # noqa: A002
            pass

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    server = http.server.ThreadingHTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    with server:
        server.serve_forever()


if __name__ == "__main__":
    main()

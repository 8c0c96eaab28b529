"""A test server that serves HTTP on every socket it got by the systemd
protocol (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES; TCP or unix stream).

Every answer is JSON: {"name": socket name, "token": $TOKEN, "pid": pid,
"argv": arguments, "children": pids}. GET /exit/N answers, then exits
with status N.

    http_server.py [--ignore-term] [--ready-after=SECONDS] [--say=TEXT]...

--ignore-term   ignore SIGTERM (a server that does not stop when asked)
--ready-after   send READY=1 to $NOTIFY_SOCKET after SECONDS (sd_notify(3))
--say=TEXT      print TEXT on stderr at start
--spawn-child   start a child process (same process group) that ignores SIGTERM
"""

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time


# Set before the answer to /exit/N: from then on this process accepts no
# connection (one it accepted would be reset when it exits); the client's
# next one waits in the shared backlog for the next server (--restart).
EXITING = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/exit/"):
            EXITING.set()
        body = json.dumps({"name": self.server.socket_name, "token": os.environ.get("TOKEN"),
                           "pid": os.getpid(), "argv": sys.argv[1:], "children": CHILDREN}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if self.path.startswith("/exit/"):
            # FIN before the process exits: the answer arrives whole.
            self.connection.shutdown(socket.SHUT_WR)
            print(f"http_server: exiting with {self.path[6:]} as asked", file=sys.stderr, flush=True)
            os._exit(int(self.path[6:]))

    def address_string(self):
        return "client"

    def log_message(self, *args):
        pass


CHILDREN = []


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        if EXITING.is_set():
            threading.Event().wait()    # until os._exit()
        return super().get_request()


def notify(message):
    address = os.environ["NOTIFY_SOCKET"]
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(message.encode(), address)


def main():
    args = sys.argv[1:]
    for a in args:
        if a == "--ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif a.startswith("--say="):
            print(a[6:], file=sys.stderr, flush=True)
        elif a == "--spawn-child":
            child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                      "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
                                     pass_fds=())
            CHILDREN.append(child.pid)
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        sys.exit(f"http_server: LISTEN_PID is {os.environ.get('LISTEN_PID')!r}, not {os.getpid()}")
    n = int(os.environ["LISTEN_FDS"])
    names = os.environ.get("LISTEN_FDNAMES", ":".join(["unknown"] * n)).split(":")
    servers = []
    for i in range(n):
        sock = socket.socket(fileno=3 + i)
        srv = Server(("", 0) if sock.family != socket.AF_UNIX else "", Handler, bind_and_activate=False)
        srv.socket.close()
        srv.socket = sock
        srv.socket_name = names[i]
        servers.append(srv)
    # Said before the first answer, not after the threads start: a client's
    # connection is already in the backlog (prebind listens before this
    # process runs), so a serving thread answers at once, and the client
    # can have its answer and stop the server (SIGTERM, fatal here) before
    # this thread gets the GIL back to print: under load the output was
    # then empty (test_one_server).
    print(f"http_server: serving {n} sockets as pid {os.getpid()}", file=sys.stderr, flush=True)
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    for a in args:
        if a.startswith("--ready-after="):
            time.sleep(float(a.split("=", 1)[1]))
            notify("READY=1")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()

"""A WSGI app for gunicorn, which reads LISTEN_FDS itself (and checks
LISTEN_PID against its own pid)."""

import os


def app(environ, start_response):
    body = f"gunicorn pid={os.getpid()} ppid={os.getppid()} path={environ['PATH_INFO']}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

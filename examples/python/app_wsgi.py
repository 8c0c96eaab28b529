"""A WSGI app for gunicorn, which reads LISTEN_FDS itself (and checks that
LISTEN_PID is the master's pid):

    prebind --print=url -- python3 -m gunicorn app_wsgi:app

Each request is also logged on stdout, to show why a reader of
`prebind --print` must keep draining the pipe after the first line.
"""

import os


def app(environ, start_response):
    body = f"gunicorn pid={os.getpid()} ppid={os.getppid()} path={environ['PATH_INFO']}\n".encode()
    print(f"app_wsgi: GET {environ['PATH_INFO']}", flush=True)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

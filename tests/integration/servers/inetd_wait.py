"""An inetd "wait" server: the listening socket is its stdin (fd 0), as
inetd and Java's System.inheritedChannel() expect. Answers HTTP."""

import os
import socket

listener = socket.socket(fileno=0)
assert listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
assert "LISTEN_FDS" not in os.environ
while True:
    conn, _ = listener.accept()
    with conn:
        conn.recv(4096)
        body = f"inetd-wait pid={os.getpid()}\n".encode()
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

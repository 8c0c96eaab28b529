"""pytest-prebind: servers on sockets that prebind binds first.

prebind binds and listens on the sockets (by default 127.0.0.1, port 0: the
kernel picks), publishes them, and only then runs the server with them as
fd 3, 4, ... (the systemd socket-activation protocol). No port is released
between choosing it and serving it, so parallel tests cannot race for one,
and a client may connect at once: nothing to poll.

In pytest, the ``prebind`` fixture (registered by the ``pytest11`` entry
point)::

    def test_api(prebind):
        srv = prebind(["python3", "-m", "uvicorn", "--fd", "3", "app:app"])
        urllib.request.urlopen(srv.url)

Anywhere else, :class:`Server` as a context manager::

    with pytest_prebind.Server(["python3", "-m", "uvicorn", "--fd", "3", "app:app"]) as srv:
        urllib.request.urlopen(srv.url)
"""

from ._server import (
    DEFAULT_START_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    PrebindError,
    PrebindNotFound,
    Server,
    ServerExited,
    Socket,
    StartError,
    describe_status,
    find_prebind,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "DEFAULT_STOP_TIMEOUT",
    "PrebindError",
    "PrebindNotFound",
    "Server",
    "ServerExited",
    "Socket",
    "StartError",
    "describe_status",
    "find_prebind",
]

"""The pytest side: the ``prebind`` fixture, its options, and the servers'
output in the report of a failed test. Registered through the ``pytest11``
entry point, so installing the package is enough."""

from __future__ import annotations

import os
from typing import Any, Callable, Generator, List, Optional, Sequence, Tuple, TypeVar, cast

import pytest

from ._server import PrebindError, Server, ServerExited

__all__ = ["PrebindFactory", "prebind"]

_REPORT_TAIL_LINES = 50
_FACTORY = pytest.StashKey["PrebindFactory"]()
_F = TypeVar("_F", bound=Callable[..., Any])
# pytest.hookimpl is untyped in pytest 7: keep the hook's own signature.
_hookwrapper = cast(Callable[[_F], _F], pytest.hookimpl(hookwrapper=True))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prebind", "servers on sockets bound by prebind")
    group.addoption(
        "--prebind-binary", dest="prebind_binary", default=None, metavar="PATH",
        help="the prebind binary the 'prebind' fixture runs (default: $PREBIND, "
             "the prebind_binary ini option, else prebind on PATH)",
    )
    parser.addini(
        "prebind_binary", default="",
        help="the prebind binary the 'prebind' fixture runs, if $PREBIND is not set; "
             "a relative path is relative to the rootdir",
    )


def _configured_binary(config: pytest.Config) -> Optional[str]:
    """--prebind-binary, else $PREBIND (left to find_prebind), else the ini
    option; None means: look for prebind on PATH."""
    cli = config.getoption("prebind_binary")
    if cli:
        return str(cli)
    if os.environ.get("PREBIND"):
        return None
    ini = str(config.getini("prebind_binary") or "")
    if not ini:
        return None
    if os.sep in ini and not os.path.isabs(ini):
        return str(config.rootpath / ini)
    return ini


class PrebindFactory:
    """What the ``prebind`` fixture gives a test: call it to start a server.

    ``prebind(command, **kwargs)`` takes the arguments of
    :class:`pytest_prebind.Server`, starts the server, waits until prebind
    has published, and returns the started :class:`~pytest_prebind.Server`.
    Every server it started is stopped when the test ends. One more keyword,
    ``check`` (default True): fail the test at teardown if this server
    exited with a non-zero status before it was stopped.
    """

    def __init__(self, binary: Optional[str] = None) -> None:
        self.binary = binary
        self.servers: List[Tuple[Server, bool]] = []

    def __call__(self, command: Sequence[str], *, check: bool = True, **kwargs: Any) -> Server:
        __tracebackhide__ = True
        kwargs.setdefault("binary", self.binary)
        server = Server(command, **kwargs)
        try:
            server.start()
        except BaseException:
            # Its StartError says it all: no second report at teardown.
            self.servers.append((server, False))
            raise
        self.servers.append((server, check))
        return server

    def stop_all(self) -> List[PrebindError]:
        """Stop every server, last started first; returns the failures
        (servers that had exited on their own with a non-zero status)."""
        failures: List[PrebindError] = []
        for server, check in reversed(self.servers):
            exited = server.exited_on_its_own
            status = server.stop()
            if check and exited and status:
                failures.append(ServerExited("the server exited before the test ended",
                                             server.argv, status, server.output_tail()))
        return failures


@pytest.fixture
def prebind(request: pytest.FixtureRequest) -> Generator[PrebindFactory, None, None]:
    """Start servers on sockets that prebind binds first::

        def test_api(prebind):
            srv = prebind(["python3", "-m", "uvicorn", "--fd", "3", "app:app"])
            urllib.request.urlopen(srv.url)   # already listening: no waiting

    Returns a :class:`PrebindFactory`; each server is stopped at teardown.
    """
    factory = PrebindFactory(_configured_binary(request.config))
    request.node.stash[_FACTORY] = factory
    yield factory
    failures = factory.stop_all()
    if failures:
        pytest.fail("\n\n".join(str(f) for f in failures), pytrace=False)


@_hookwrapper
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test's report gets a section per server: its state and the
    last lines of its output."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    factory = item.stash.get(_FACTORY, None)
    if factory is None or not report.failed or call.when == "teardown":
        return
    for index, (server, _check) in enumerate(factory.servers):
        if not server.sockets:
            continue  # it never started: its StartError has the output
        status = server.returncode
        state = "running" if server.running else (
            "not started" if server.prebind_pid is None else f"prebind exited {status}")
        body = "\n".join([f"{state}; {' '.join(s.url for s in server.sockets)}",
                          server.output_tail(_REPORT_TAIL_LINES)])
        report.sections.append((f"prebind server {index}: {' '.join(server.command)}", body))

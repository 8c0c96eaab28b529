"""Run a server under prebind and read back what it published.

Nothing here imports pytest: :class:`Server` works in any Python program.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple, Union


#: Seconds to wait for prebind to publish, unless ``timeout=`` says otherwise.
DEFAULT_START_TIMEOUT = 60.0
#: Seconds a server has to exit after SIGTERM before it is killed.
DEFAULT_STOP_TIMEOUT = 5.0
# How long prebind itself may take beyond its --kill-after before it is
# killed too, and the bound on every wait after a SIGKILL.
_GRACE = 5.0
# Lines of output shown in an error message, found in its last _TAIL_BYTES.
_TAIL_LINES = 20
_TAIL_BYTES = 64 * 1024

Duration = Union[float, int, str]
"""A duration: seconds as a number, or prebind's syntax (``"500ms"``, ``"2s"``)."""


class PrebindError(Exception):
    """Base class of the errors this package raises."""


class PrebindNotFound(PrebindError):
    """No prebind binary: not on PATH, and not named by ``PREBIND`` or the
    ``prebind_binary`` ini option."""


class _Failure(PrebindError):
    """prebind or its server stopped, with the evidence: prebind's exit
    status, its own error lines and the last lines of output."""

    def __init__(self, headline: str, command: Sequence[str], status: Optional[int], output: str) -> None:
        self.headline = headline
        self.command = list(command)
        self.status = status
        self.output = output
        super().__init__(self._message())

    @property
    def error_lines(self) -> List[str]:
        """prebind's own messages (lines that start with ``prebind:``)."""
        return [line for line in self.output.splitlines() if line.startswith("prebind:")]

    def _message(self) -> str:
        parts = [self.headline]
        if self.status is not None:
            parts.append(f"  exit status {self.status}: {describe_status(self.status)}")
        parts.append(f"  command: {_shell_join(self.command)}")
        errors = self.error_lines
        if errors:
            parts.append("  prebind said:")
            parts.extend(f"    {_shorten(line)}" for line in errors[-5:])
        tail = self.output.splitlines()[-_TAIL_LINES:]
        if tail:
            parts.append(f"  last {len(tail)} lines of output (prebind's and the server's):")
            parts.extend(f"    | {_shorten(line)}" for line in tail)
        elif self.output is not None:
            parts.append("  (no output)")
        return "\n".join(parts)


class StartError(_Failure):
    """prebind did not publish: bad usage (125), COMMAND not found (127) or
    not runnable (126), not ready in time (124), the server exited first, or
    nothing came within the start timeout (``status`` is then None)."""


class ServerExited(_Failure):
    """The server (and so prebind) exited on its own before it was stopped."""


def _shorten(line: str, width: int = 300) -> str:
    return line if len(line) <= width else f"{line[:width]}... ({len(line) - width} more characters)"


def describe_status(status: int) -> str:
    """What an exit status of prebind means (see prebind(1), EXIT STATUS)."""
    if status < 0:
        return f"prebind was killed by {_signal_name(-status)}"
    if status == 0:
        return "the server exited successfully"
    if status == 124:
        return "not ready in time (or an intercepted port was never claimed)"
    if status == 125:
        return "prebind itself failed (bad usage, bind error, ...)"
    if status == 126:
        return "the command was found but could not be run"
    if status == 127:
        return "the command was not found"
    if status > 128:
        return f"the server was killed by {_signal_name(status - 128)}"
    return f"the server exited with status {status}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _shell_join(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def find_prebind(binary: Optional[str] = None) -> str:
    """The prebind to run: *binary* if given (a path, or a name looked up on
    PATH), else ``$PREBIND``, else ``prebind`` on PATH."""
    candidate = binary or os.environ.get("PREBIND") or "prebind"
    if os.sep in candidate:
        if not os.access(candidate, os.X_OK):
            raise PrebindNotFound(f"prebind binary {candidate!r} does not exist or is not executable")
        return os.path.abspath(candidate)
    found = shutil.which(candidate)
    if not found:
        raise PrebindNotFound(
            f"{candidate!r} not found on PATH: install prebind, or name the binary with "
            "$PREBIND or the prebind_binary ini option"
        )
    return found


def _duration(value: Duration) -> str:
    if isinstance(value, bool):
        raise TypeError("a duration is a number of seconds or a string such as '500ms'")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"negative duration: {value!r}")
        if value == int(value) and value >= 1:
            return f"{int(value)}s"
        return f"{max(1, round(value * 1000))}ms"
    return str(value)


@dataclass(frozen=True)
class Socket:
    """One socket as prebind published it (one entry of ``--format=json``)."""

    fd: int
    """The fd COMMAND got it on (3, 4, ...)."""
    name: str
    """Its name in ``LISTEN_FDNAMES`` (``unknown`` if unnamed)."""
    family: str
    """``ipv4``, ``ipv6`` or ``unix``."""
    type: str
    """``stream`` or ``dgram``."""
    address: str
    """The bound host (``127.0.0.1``, ``::1``) or unix path (``/p``, ``@name``)."""
    port: Optional[int]
    """The port (None for a unix socket)."""
    url: str
    """``http://127.0.0.1:41234``, ``udp://...``, ``unix:/path``: a wildcard
    address is shown as loopback, since a URL is for a local client."""

    @property
    def host(self) -> str:
        """The host to connect to: the URL's host without IPv6 brackets
        (``127.0.0.1`` for a socket bound to ``*``), or the unix path."""
        if self.family == "unix":
            return self.address
        rest = self.url.split("://", 1)[-1]
        host = rest.rsplit(":", 1)[0]
        return host[1:-1] if host.startswith("[") else host

    @property
    def addr(self) -> str:
        """``host:port`` (``[::1]:port`` for IPv6), or the unix path."""
        if self.family == "unix":
            return self.address
        return self.url.split("://", 1)[-1]

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> "Socket":
        return cls(
            fd=int(entry["fd"]),
            name=str(entry["name"]),
            family=str(entry["family"]),
            type=str(entry["type"]),
            address=str(entry["address"]),
            port=None if entry.get("port") is None else int(entry["port"]),
            url=str(entry["url"]),
        )


ListenSpec = Union[str, Sequence[str], Mapping[str, str]]
InterceptSpec = Union[int, str, Sequence[Union[int, str]], Mapping[str, int]]


# ------------------------------------------------------------ the options

# How a keyword argument's value becomes prebind arguments: form(flag, value).
_Form = Callable[[str, Any], List[str]]


def _switch(flag: str, value: Any) -> List[str]:
    return [flag] if value else []


def _value(flag: str, value: Any) -> List[str]:
    return [] if value is None else [f"{flag}={value}"]


def _duration_value(flag: str, value: Any) -> List[str]:
    return [] if value is None else [f"{flag}={_duration(value)}"]


def _switch_or_duration(flag: str, value: Any) -> List[str]:
    """True: the bare option; a duration: its value; None, False: nothing."""
    if value is True:
        return [flag]
    return [] if value is None or value is False else [f"{flag}={_duration(value)}"]


def _switch_or_value(flag: str, value: Any) -> List[str]:
    """True: the bare option; another true value: its value; else nothing."""
    if value is True:
        return [flag]
    return [f"{flag}={value}"] if value else []


def _repeated(*single: type) -> _Form:
    """One option per item: a *single* value, a list, or {NAME: value} as
    NAME=value."""
    def form(flag: str, value: Any) -> List[str]:
        if value is None:
            return []
        if isinstance(value, single):
            items: List[str] = [str(value)]
        elif isinstance(value, Mapping):
            items = [f"{name}={v}" for name, v in value.items()]
        else:
            items = [str(v) for v in value]
        return [f"{flag}={item}" for item in items]
    return form


def _variables(flag: str, value: Any) -> List[str]:
    """{NAME: VALUE}: NAME=VALUE; a None VALUE: NAME alone (prebind copies it)."""
    return [f"{flag}={name}" if v is None else f"{flag}={name}={v}" for name, v in (value or {}).items()]


@dataclass(frozen=True)
class Option:
    """A prebind option the plugin can pass: *flag*, set by :class:`Server`'s
    keyword argument *keyword* through *form*, or (no keyword) by the plugin
    itself."""

    flag: str
    keyword: Optional[str] = None
    form: Optional[_Form] = None

    def arguments(self, value: Any) -> List[str]:
        assert self.form is not None
        return self.form(self.flag, value)


# The options the plugin passes or looks for itself.
PORT_FD = Option("--port-fd")
FORMAT = Option("--format")
DIE_WITH_PARENT = Option("--die-with-parent")
KILL_AFTER = Option("--kill-after")
EXEC = Option("--exec")      # in options=[...]: no supervisor, so no --kill-after, --die-with-parent
GROUP = Option("--group", "group", _switch)

#: Every prebind option the plugin names: those it sets itself, then those
#: of :class:`Server`'s keyword arguments, in the order they are passed.
#: python/tests/test_options.py checks each against ``prebind --help``.
OPTIONS: Tuple[Option, ...] = (
    PORT_FD, FORMAT, DIE_WITH_PARENT, KILL_AFTER, EXEC,
    Option("--listen", "listen", _repeated(str)),
    Option("--setenv", "setenv", _variables),
    Option("--subst", "subst", _switch),
    Option("--ready", "ready", _switch_or_duration),
    Option("--ready-timeout", "ready_timeout", _duration_value),
    Option("--ready-log", "ready_log", _value),
    Option("--ready-http", "ready_http", _switch_or_value),
    Option("--ready-exec", "ready_exec", _value),
    Option("--intercept", "intercept", _repeated(int, str)),
    Option("--intercept-via", "intercept_via", _value),
    Option("--restart", "restart", _value),
    GROUP,
    Option("--share", "share", _value),
    Option("--share-linger", "share_linger", _duration_value),
)

# Options the plugin sets itself: a second --format or --port-fd in
# options=[...] would change what it reads.
_RESERVED = (FORMAT.flag, PORT_FD.flag)


class _Default:
    """The type of "not given" where None means something."""


_DEFAULT = _Default()
# prebind's own default --ready-timeout (prebind(1)).
_PREBIND_READY_TIMEOUT = 90.0


def _seconds(value: Duration) -> Optional[float]:
    """A duration in seconds; None for ``infinity``."""
    if isinstance(value, bool):
        raise TypeError("a duration is a number of seconds or a string such as '500ms'")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text == "infinity":
        return None
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0), ("", 1.0)):
        if text.endswith(suffix):
            try:
                return float(text[:len(text) - len(suffix)]) * scale
            except ValueError:
                break
    raise ValueError(f"not a duration: {value!r} (seconds, or e.g. '500ms', '2s', '1m')")


def _start_timeout(ready: Union[bool, Duration, None], ready_timeout: Optional[Duration],
                   other_readiness: bool) -> Optional[float]:
    """How long to wait for publication by default: 60 s, or, when prebind
    waits for readiness, its own bound and a little more (it then reports
    124 itself, with the reason)."""
    if ready_timeout is not None:
        bound = _seconds(ready_timeout)
    elif ready is not None and ready is not False and ready is not True:
        bound = _seconds(ready)
    elif ready is True or other_readiness:
        bound = _PREBIND_READY_TIMEOUT
    else:
        return DEFAULT_START_TIMEOUT
    return None if bound is None else max(DEFAULT_START_TIMEOUT, bound + _GRACE)


class Server:
    """A server started through prebind, on sockets prebind bound first.

    ::

        with Server(["python3", "-m", "uvicorn", "--fd", "3", "app:app"]) as srv:
            urllib.request.urlopen(srv.url)

    *command* is COMMAND and its arguments. The keyword arguments map to
    prebind's options:

    - ``listen``: ``"0"``, ``["web=0", "admin=/run/a.sock"]`` or
      ``{"web": "0", "admin": "@name"}`` (``-l``; default one TCP socket on
      127.0.0.1, port 0);
    - ``setenv``: ``{"BASE_URL": "{url}"}``, a None value copies the
      variable from prebind's environment (``-E``);
    - ``subst``: expand ``{port}``, ``{web.url}``... in *command* (``--subst``);
    - ``ready``: True, or a timeout, to publish only after ``READY=1``
      (``--ready``); ``ready_timeout``: ``--ready-timeout``;
    - ``ready_log``, ``ready_http``, ``ready_exec``: publish once a line of
      output matches, ``GET`` answers, a probe succeeds (``--ready-log``,
      ``--ready-http``, ``--ready-exec``);
    - ``intercept``: ``8080``, ``["web=8080", "admin=9090"]`` or
      ``{"web": 8080}``: the server's own bind() of that port gets the
      socket (``--intercept``); ``intercept_via``: ``"seccomp"``,
      ``"preload"`` or, with ``--netns``, ``"forward"`` (``--intercept-via``;
      default prebind's ``auto``);
    - ``restart``: ``"on-failure"`` or ``"always"`` (``--restart``);
    - ``group``: signal COMMAND's whole process group (``--group``);
    - ``share``: a name (``"pg"``): every Server with the same name and the
      same command and options, in any process of this user (every
      pytest-xdist worker), uses one server, started by the first and
      stopped ``share_linger`` (default 1 s, ``"infinity"``) after the last
      has stopped (``--share``, ``--share-linger``). :meth:`stop` then lets
      go of the shared server; it stops only once nobody holds it;
    - ``options``: any other prebind options, passed as they are, before
      ``--`` (``["--intercept=8080", "--ready-http=/health"]``).

    And to the way the plugin runs it:

    - ``binary``: the prebind to run (default: ``$PREBIND``, else PATH);
    - ``timeout``: seconds to wait for prebind to publish (default 60, or
      the readiness timeout and 5 more if a ``ready*`` option is given;
      None: no bound, for ``ready="infinity"``);
    - ``stop_timeout``: seconds the server has after SIGTERM before it is
      killed (given to prebind as ``--kill-after``);
    - ``capture_output``: collect prebind's and the server's stdout and
      stderr in a temporary file, read by :meth:`output` and shown in error
      messages (default); False leaves them on the caller's;
    - ``die_with_parent``: stop the server if this process dies
      (``--die-with-parent``, default). The kernel fires it when the
      *thread* that started prebind exits: start servers from a thread that
      outlives them;
    - ``cwd``, ``env``: as for :class:`subprocess.Popen`.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        listen: Optional[ListenSpec] = None,
        setenv: Optional[Mapping[str, Optional[str]]] = None,
        subst: bool = False,
        ready: Union[bool, Duration, None] = None,
        ready_timeout: Optional[Duration] = None,
        ready_log: Optional[str] = None,
        ready_http: Union[bool, str, None] = None,
        ready_exec: Optional[str] = None,
        intercept: Optional[InterceptSpec] = None,
        intercept_via: Optional[str] = None,
        restart: Optional[str] = None,
        group: bool = False,
        share: Optional[str] = None,
        share_linger: Optional[Duration] = None,
        options: Sequence[str] = (),
        binary: Optional[str] = None,
        timeout: Union[float, None, _Default] = _DEFAULT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        capture_output: bool = True,
        die_with_parent: bool = True,
        cwd: Optional[Union[str, "os.PathLike[str]"]] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        arguments = dict(locals())  # first: the keyword arguments as given
        if isinstance(command, (str, bytes)):
            raise TypeError("command is a list of arguments, not a string: ['python3', '-m', 'app']")
        if not command:
            raise ValueError("command is empty")
        if isinstance(options, (str, bytes)):
            raise TypeError("options is a list of arguments: ['--ready-http=/health']")
        for option in options:
            if option.split("=", 1)[0] in _RESERVED:
                raise ValueError(f"{option!r}: the plugin sets {PORT_FD.flag} and {FORMAT.flag}=json itself")
        if isinstance(timeout, _Default):
            timeout = _start_timeout(ready, ready_timeout, bool(ready_log or ready_http or ready_exec))
        if stop_timeout <= 0 or (timeout is not None and timeout <= 0):
            raise ValueError("timeout and stop_timeout must be positive")

        self.command: List[str] = [str(a) for a in command]
        self.options: List[str] = _build_options(arguments, options)
        self._binary = binary
        self.timeout: Optional[float] = None if timeout is None else float(timeout)
        self.stop_timeout = float(stop_timeout)
        self.capture_output = capture_output
        self._exec_mode = EXEC.flag in self.options
        # --kill-after and --die-with-parent need the supervisor: prebind
        # refuses them with --exec.
        self._die_with_parent = die_with_parent and not self._exec_mode
        self._group = group or GROUP.flag in self.options
        # A shared server is the supervisor's to stop, never this Server's:
        # stopping this prebind only lets go of it.
        self._shared = share is not None
        self._cwd = cwd
        self._env = dict(env) if env is not None else None

        self.sockets: List[Socket] = []
        """Every socket, in fd order."""
        self.prebind_pid: Optional[int] = None
        """prebind's pid (it forwards signals to the server)."""
        self.pid: Optional[int] = None
        """The server's pid: the first COMMAND's (None with ``--accept``).
        Under ``restart=``, a restarted server has another one."""
        self.published: Dict[str, Any] = {}
        """The JSON object prebind published, as it came."""

        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._log: Optional[int] = None  # the output file's fd
        self._pidfd: Optional[int] = None
        self._stopping = False
        self._returncode: Optional[int] = None
        self._final_output = ""

    # ----------------------------------------------------------------- argv

    @property
    def argv(self) -> List[str]:
        """The prebind command line, less the ``--port-fd`` number, which is
        known only at start: ``--port-fd=N`` stands in for it."""
        return self._argv("N")

    def _argv(self, port_fd: str) -> List[str]:
        own = [f"{PORT_FD.flag}={port_fd}", f"{FORMAT.flag}=json"]
        if self._die_with_parent:
            own.append(DIE_WITH_PARENT.flag)
        if not self._exec_mode:
            own.append(f"{KILL_AFTER.flag}={_duration(self.stop_timeout)}")
        return [find_prebind(self._binary), *own, *self.options, "--", *self.command]

    # ---------------------------------------------------------------- start

    def start(self) -> "Server":
        """Start prebind and wait until it has published (at most
        ``timeout`` seconds). Raises :class:`StartError` with prebind's
        message and the output if it exits first or publishes nothing."""
        __tracebackhide__ = True
        if self._proc is not None:
            raise PrebindError("this Server was already started")
        read_fd, write_fd = os.pipe()
        try:
            argv = self._argv(str(write_fd))
            if self.capture_output:
                self._log = _output_file()
            out = self._log
            self._proc = subprocess.Popen(
                argv, pass_fds=[write_fd], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                cwd=self._cwd, env=self._env,
            )
        except BaseException:
            os.close(read_fd)
            self._close_log()
            raise
        finally:
            # From now on only prebind holds the write end: EOF as soon as
            # it has published and closed it, or exited.
            os.close(write_fd)
        self.prebind_pid = self._proc.pid
        try:
            data, timed_out = _read_to_eof(read_fd, self.timeout)
        finally:
            os.close(read_fd)
        if timed_out or not data:
            if timed_out:
                self._start_failed(f"prebind published nothing within {self.timeout or 0:g}s")
            self._start_failed("prebind exited without publishing: the server did not start", exiting=True)
        try:
            published = json.loads(data)
            self.sockets = [Socket.from_json(s) for s in published["sockets"]]
        except (ValueError, KeyError, TypeError) as e:
            self._start_failed(f"prebind published something that is not its JSON ({e}): {data[:200]!r}")
        self.published = published
        child = published.get("child_pid")
        self.pid = int(child) if child else None
        if self.pid is not None and not self._shared:
            # A handle on exactly this process: it stays valid even if
            # prebind dies and the pid is reused, for the last-resort kill.
            try:
                self._pidfd = os.pidfd_open(self.pid)
            except OSError:
                self._pidfd = None
        if self._proc.poll() is not None:
            self._start_failed("the server exited right after prebind published")
        return self

    def _start_failed(self, headline: str, exiting: bool = False) -> NoReturn:
        __tracebackhide__ = True
        if self._proc is not None and exiting:
            # EOF without data: prebind closes the pipe as it exits.
            try:
                self._proc.wait(timeout=_GRACE)
            except subprocess.TimeoutExpired:
                pass
        stopped_by_us = self.returncode is None
        status = self._terminate(self.stop_timeout)
        if stopped_by_us:
            status = None  # our SIGTERM's: it says nothing about the failure
        self._close_log()
        raise StartError(headline, self.argv, status, self.output_tail(_TAIL_LINES))

    # ---------------------------------------------------------------- state

    def _first(self) -> Socket:
        if not self.sockets:
            raise PrebindError("the server is not started: no sockets yet")
        return self.sockets[0]

    @property
    def url(self) -> str:
        """The first socket's URL: ``http://127.0.0.1:41234``."""
        return self._first().url

    @property
    def port(self) -> int:
        """The first socket's port."""
        port = self._first().port
        if port is None:
            raise PrebindError(f"the first socket ({self._first().url}) has no port")
        return port

    @property
    def host(self) -> str:
        """The first socket's host, to connect to (``127.0.0.1``)."""
        return self._first().host

    @property
    def addr(self) -> str:
        """The first socket's ``host:port``."""
        return self._first().addr

    def __getitem__(self, key: Union[str, int]) -> Socket:
        """A socket by name (``srv["admin"].url``) or by index (``srv[1]``)."""
        if isinstance(key, int):
            return self.sockets[key]
        for s in self.sockets:
            if s.name == key:
                return s
        names = ", ".join(repr(s.name) for s in self.sockets) or "none"
        raise KeyError(f"no socket named {key!r} (sockets: {names})")

    def __repr__(self) -> str:
        state = "not started" if self._proc is None else (
            "running" if self.returncode is None else f"exited {self.returncode}")
        where = " ".join(s.url for s in self.sockets)
        return f"<Server {_shell_join(self.command)} {where} ({state})>"

    @property
    def returncode(self) -> Optional[int]:
        """prebind's exit status once it has exited (the server's status,
        or 124-127), else None; negative if prebind was killed by a signal."""
        if self._proc is None:
            return None
        if self._returncode is None:
            self._returncode = self._proc.poll()
        return self._returncode

    @property
    def running(self) -> bool:
        """True while prebind (and so the server) runs."""
        return self._proc is not None and self.returncode is None

    @property
    def exited_on_its_own(self) -> bool:
        """True if prebind exited without being stopped by :meth:`stop`."""
        return self._proc is not None and not self._stopping and self.returncode is not None

    def output(self) -> str:
        """What prebind and the server wrote to stdout and stderr so far
        (with ``capture_output``; else the empty string)."""
        if self._log is None:
            return self._final_output
        return _read_all(self._log)

    def output_tail(self, lines: int = _TAIL_LINES) -> str:
        """The last *lines* lines of :meth:`output` (from its last 64 KiB:
        a chatty server's log is not read whole for an error message)."""
        if self._log is None:
            text = self._final_output[-_TAIL_BYTES:]
        else:
            text = _read_all(self._log, start=max(0, os.fstat(self._log).st_size - _TAIL_BYTES))
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------ signalling

    def send_signal(self, sig: int) -> None:
        """Signal prebind, which forwards the signal to the server (SIGHUP
        restarts it under ``restart=``)."""
        if self.running and self._proc is not None:
            self._proc.send_signal(sig)

    def wait(self, timeout: Optional[float] = None) -> int:
        """Wait until prebind exits and return its status; raises
        :class:`subprocess.TimeoutExpired` after *timeout* seconds."""
        if self._proc is None:
            raise PrebindError("the server is not started")
        status = self._proc.wait(timeout=timeout)
        self._returncode = status
        return status

    def check(self) -> None:
        """Raise :class:`ServerExited` (with prebind's messages and the
        output) if the server exited on its own, whatever its status."""
        __tracebackhide__ = True
        if self.exited_on_its_own:
            raise ServerExited("the server exited before it was stopped", self.argv, self.returncode,
                               self.output_tail(_TAIL_LINES))

    def stop(self) -> Optional[int]:
        """Stop the server and return prebind's exit status (None if it was
        never started). SIGTERM goes to prebind, which forwards it and
        SIGKILLs the server (``--kill-after``) if it is still there after
        ``stop_timeout`` seconds; if prebind is still there 5 seconds
        later, it and the server are killed. If prebind was killed, the
        server has gone with it, or (``--no-die-with-supervisor``) is
        killed now. Bounded; safe to call twice."""
        if self._proc is None:
            return None
        if self.returncode is None:
            self._stopping = True
        status = self._terminate(self.stop_timeout)
        self._close_log()
        return status

    def _terminate(self, timeout: float) -> Optional[int]:
        proc = self._proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                # prebind's own --kill-after fires at `timeout`; give it a
                # little more to reap and exit. With --exec, prebind is the
                # server: nobody else will escalate.
                bound = timeout if self._exec_mode else timeout + _GRACE
                try:
                    proc.wait(timeout=bound)
                except subprocess.TimeoutExpired:
                    self._kill_everything()
                    proc.wait(timeout=_GRACE)
            self._returncode = proc.returncode
        finally:
            if self._pidfd is not None:
                # prebind has exited. A killed prebind takes the server
                # along (its death signal and guard, prebind(1) WHEN
                # PREBIND DIES), except under --no-die-with-supervisor in
                # options=[...]: then the server is an orphan, killed now.
                # Harmless otherwise: the pidfd names only that process.
                self._kill_server()
                os.close(self._pidfd)
                self._pidfd = None
        return self._returncode

    def _kill_everything(self) -> None:
        # The group first, while prebind (alive, or a zombie not yet
        # waited for) keeps the leader's pid from being reused. Once
        # prebind has exited normally it has stopped the group itself.
        if self._group and self.pid and not self._shared:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._kill_server()

    def _kill_server(self) -> None:
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass  # gone already (ESRCH)

    def _close_log(self) -> None:
        if self._log is not None:
            self._final_output = _read_all(self._log)
            os.close(self._log)
            self._log = None

    # ------------------------------------------------------ context manager

    def __enter__(self) -> "Server":
        __tracebackhide__ = True
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        # A Server dropped without stop(): do not leak a running server.
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._kill_everything()
                self._proc.wait(timeout=_GRACE)
        except Exception:
            pass


def _build_options(arguments: Mapping[str, Any], options: Sequence[str]) -> List[str]:
    """The prebind arguments of Server's keyword *arguments* (OPTIONS, in
    its order), then *options* as they are."""
    argv: List[str] = []
    for option in OPTIONS:
        if option.keyword is not None:
            argv += option.arguments(arguments[option.keyword])
    argv += [str(o) for o in options]
    return argv


def _read_to_eof(fd: int, timeout: Optional[float]) -> Tuple[bytes, bool]:
    """Everything written to *fd* until EOF, waiting at most *timeout*
    seconds (None: no bound). Returns (data, timed out)."""
    data = b""
    deadline = None if timeout is None else time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return data, True
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return data, False
            data += chunk


def _output_file() -> int:
    """An unnamed temporary file for prebind's and the server's output.
    O_APPEND: the writers share its offset with us, so every write must go
    to the end whatever we do; we read with pread(), which moves nothing."""
    fd, path = tempfile.mkstemp(prefix="prebind-output-")
    os.unlink(path)
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)
    return fd


def _read_all(fd: int, start: int = 0) -> str:
    chunks: List[bytes] = []
    offset = start
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)
        offset += len(chunk)


# Shown as pytest_prebind.StartError, not pytest_prebind._server.StartError.
for _public in (PrebindError, PrebindNotFound, StartError, ServerExited, Socket, Server):
    _public.__module__ = "pytest_prebind"

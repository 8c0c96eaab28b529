"""The example systemd units (units/*.in): every unit passes
`systemd-analyze verify` without a single warning, and the units do what
they say, run with the pieces of systemd that work without systemd as
PID 1: the .socket + .service pair under systemd-socket-activate (the
socket's FileDescriptorName, the service's ExecStart as configured), the
Type=notify service with a NOTIFY_SOCKET of the test's own, as the service
manager would give it.

The templates name the installed programs (@bindir@, @pkglibexecdir@); here
they are configured for the build tree instead, so that every ExecStart
binary exists. test_install.py checks the copies meson configures for
`meson install`."""

import glob
import os
import re
import shlex
import signal
import socket
import subprocess
import time

import pytest

from conftest import EXAMPLE_C_SERVER, HERE, PREBIND, PREBIND_BUILT, TIMEOUT, http_get, wait_for

UNITS_SRC = os.path.normpath(os.path.join(HERE, "..", "..", "units"))
BUILD_DIR = os.path.dirname(os.path.dirname(PREBIND_BUILT))
BUILT_MAN_PAGE = os.path.join(BUILD_DIR, "man", "prebind.1")
TEMPLATES = sorted(glob.glob(os.path.join(UNITS_SRC, "*.in")))


def configure_for_build_tree(dest):
    """Fill the placeholders as units/meson.build does, with the build
    tree's paths; returns {unit name: path}."""
    values = {
        "bindir": os.path.dirname(PREBIND),
        "pkglibexecdir": os.path.dirname(EXAMPLE_C_SERVER),
    }
    dest.mkdir(exist_ok=True)
    units = {}
    for template in TEMPLATES:
        name = os.path.basename(template)[:-len(".in")]
        text = open(template).read()
        for key, value in values.items():
            text = text.replace(f"@{key}@", value)
        left = re.findall(r"@[A-Za-z_]+@", text)
        assert not left, f"{name}: placeholders this test does not know: {left}"
        (dest / name).write_text(text)
        units[name] = str(dest / name)
    return units


def parse_unit(path):
    """{section: {key: [values]}}, with systemd's comments and backslash
    continuations; enough for our own units."""
    sections, section, pending = {}, None, ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if not pending and line.lstrip().startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = sections.setdefault(line[1:-1], {})
            continue
        key, value = line.split("=", 1)
        section.setdefault(key.strip(), []).append(value.strip())
    return sections


def exec_start_argv(service, runtime_dir):
    """ExecStart= as argv: the prefixes (-@:+!) dropped, %t (the runtime
    directory) and %% expanded; any other specifier is a failure here, so
    that this test is updated when the units start using one."""
    (line,) = service["Service"]["ExecStart"]
    line = line.lstrip("-@:+!")
    assert not re.search(r"%[^t%]", line), f"a specifier this test does not expand: {line}"
    line = line.replace("%t", str(runtime_dir)).replace("%%", "%")
    return shlex.split(line)


class NotifySocket:
    """What systemd gives a Type=notify service: a datagram socket path in
    NOTIFY_SOCKET. Collects the messages."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.bind(self.path)
        self.messages = []

    def wait_for(self, line, timeout=TIMEOUT):
        """The first message with this line (or with a line starting with
        it, if it ends with '='); bounded."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.messages:
                for l in m.split("\n"):
                    if l == line or (line.endswith("=") and l.startswith(line)):
                        return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {line!r} within {timeout}s; got {self.messages}")
            self.sock.settimeout(left)
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def close(self):
        self.sock.close()


@pytest.fixture
def units(tmp_path):
    return configure_for_build_tree(tmp_path / "units")


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=TIMEOUT)
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()


def test_every_template_is_a_unit():
    names = sorted(os.path.basename(t)[:-len(".in")] for t in TEMPLATES)
    assert names == ["prebind-demo.service", "prebind-demo.socket", "prebind-notify-demo.service"]


def test_every_unit_passes_systemd_analyze_verify(units, tmp_path):
    env = dict(os.environ)
    args = ["systemd-analyze", "verify"]
    if os.path.exists(BUILT_MAN_PAGE):
        # Documentation=man:prebind(1) is checked with man(1): make the
        # built page the only one it can find.
        man1 = tmp_path / "man" / "man1"
        man1.mkdir(parents=True)
        (man1 / "prebind.1").symlink_to(BUILT_MAN_PAGE)
        env["MANPATH"] = str(tmp_path / "man")
    else:
        # Built with -Dman=disabled (no scdoc): nothing to find. CI builds
        # it (-Dman=enabled); test_install checks the installed page.
        args.append("--man=no")
    out = subprocess.run(args + sorted(units.values()), env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    # Not one line of output: systemd-analyze prints warnings (unknown
    # keys, bad values, missing binaries) even when it exits 0.
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_verify_would_notice_a_broken_unit(units, tmp_path):
    """The check above is not vacuous on this host: a misspelt key and a
    missing ExecStart binary are reported."""
    broken = tmp_path / "broken"
    broken.mkdir()
    text = open(units["prebind-notify-demo.service"]).read()
    text = text.replace("KillMode=mixed", "KillMod=mixed").replace(PREBIND, PREBIND + "-missing")
    (broken / "prebind-notify-demo.service").write_text(text)
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", str(broken / "prebind-notify-demo.service")],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode != 0
    assert "Unknown key 'KillMod'" in out.stderr
    assert "prebind-missing is not executable" in out.stderr


def test_both_services_notify_systemd_from_the_main_process(units):
    for name in ("prebind-demo.service", "prebind-notify-demo.service"):
        service = parse_unit(units[name])["Service"]
        assert service["Type"] == ["notify"] and service["NotifyAccess"] == ["main"], name
        # SIGTERM to prebind alone, which forwards it once to the server.
        assert service["KillMode"] == ["mixed"], name


def unix_listening(path):
    """Is a unix stream socket listening at path? Read from /proc/net/unix
    (flag __SO_ACCEPTCON), without connecting: a connection would start the
    service."""
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == str(path) and int(fields[3], 16) & 0x10000:
                return True
    return False


def test_socket_pair_under_systemd_socket_activate(units, tmp_path):
    """prebind-demo.socket + prebind-demo.service: systemd-socket-activate
    plays systemd's part (it owns the socket, names it, starts the service
    on the first connection, with a NOTIFY_SOCKET as for Type=notify).
    The socket's 127.0.0.1:8080 is replaced by a unix socket in tmp_path:
    no fixed port in a test."""
    sock_unit = parse_unit(units["prebind-demo.socket"])
    service = parse_unit(units["prebind-demo.service"])
    (fdname,) = sock_unit["Socket"]["FileDescriptorName"]
    assert fdname == "web"
    assert sock_unit["Socket"]["ListenStream"] == ["127.0.0.1:8080"]

    run_dir = tmp_path / "run"  # %t
    (run_dir / service["Service"]["RuntimeDirectory"][0]).mkdir(parents=True)
    argv = exec_start_argv(service, run_dir)
    assert argv[0] == PREBIND and EXAMPLE_C_SERVER in argv
    port_file = run_dir / "prebind-demo" / "port"
    assert f"--port-file={port_file}" in argv

    address = tmp_path / "web.sock"
    notify = NotifySocket(tmp_path / "notify")
    act = subprocess.Popen(["systemd-socket-activate", "-l", str(address), f"--fdname={fdname}",
                            "-E", f"NOTIFY_SOCKET={notify.path}", "--", *argv],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Listening, not only bound: the file exists between bind() and
        # listen(), and a connection in that gap is refused.
        assert wait_for(lambda: unix_listening(address)), "systemd-socket-activate did not listen"
        assert not port_file.exists()  # the service starts on the first connection
        # The server (--expect web:stream) got the socket as fd 3 with its name.
        status, body = http_get(f"unix:{address}")
        assert status == 200 and "fd=3 name=web" in body, body
        # Passed through and published alone: no default socket was added
        # (the server's --expect would have exited 2 on a second one).
        assert wait_for(port_file.exists)
        assert port_file.read_text() == f"unix:{address}\n"
        ready = notify.wait_for("READY=1")
        assert f"STATUS=listening on unix:{address}" in ready.split("\n"), ready
        assert act.poll() is None

        act.send_signal(signal.SIGTERM)  # KillMode=mixed: the main process only
        assert act.wait(timeout=TIMEOUT) == 0, act.stderr.read()
        notify.wait_for("STOPPING=1")
        assert not port_file.exists()
    finally:
        stop(act)
        notify.close()


def test_notify_service_is_ready_only_when_the_server_is(units, tmp_path):
    """prebind-notify-demo.service: its ExecStart, with the NOTIFY_SOCKET
    systemd gives a Type=notify service. prebind binds 127.0.0.1:0; the
    server sends READY=1 after a second; only then does prebind write the
    port file and tell its manager READY=1 with the URL."""
    service = parse_unit(units["prebind-notify-demo.service"])
    run_dir = tmp_path / "run"
    (run_dir / service["Service"]["RuntimeDirectory"][0]).mkdir(parents=True)
    argv = exec_start_argv(service, run_dir)
    assert "-l" in argv and argv[argv.index("-l") + 1] == "web=127.0.0.1:0"  # no fixed port
    port_file = run_dir / "prebind-notify-demo" / "port"
    assert f"--port-file={port_file}" in argv

    notify = NotifySocket(tmp_path / "notify")
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = notify.wait_for("READY=1")
        assert time.monotonic() - t0 >= 0.9  # --notify-after=1: not before the server
        status_lines = [l for l in ready.split("\n") if l.startswith("STATUS=")]
        assert len(status_lines) == 1 and re.fullmatch(
            r"STATUS=listening on http://127\.0\.0\.1:[1-9][0-9]*", status_lines[0]), ready
        url = status_lines[0].split(" ")[-1]
        # Published before READY=1 reached the manager.
        assert port_file.read_text() == url + "\n"
        status, body = http_get(url)
        assert status == 200 and "fd=3 name=web" in body, body

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0, proc.stderr.read()
        notify.wait_for("STOPPING=1")
        assert not port_file.exists()
    finally:
        stop(proc)
        notify.close()

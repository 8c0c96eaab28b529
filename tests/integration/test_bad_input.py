"""Bad input: a one-line error, exit 125, no COMMAND run, nothing left on
disk (no port file, no socket file, no temporary file)."""

import os
import socket
import subprocess

import pytest

from conftest import PREBIND, TIMEOUT, run

LONG_PATH = "/tmp/" + "x" * 110
NAME_256 = "n" * 256

# (id, arguments before "--", expected fragment of the message)
CASES = [
    ("word", ["-l", "foo"], "--listen: 'foo': invalid address"),
    ("port-too-big", ["-l", "65536"], "port out of range 0-65535"),
    ("port-negative", ["-l", "-1"], "invalid address"),
    ("port-plus", ["-l", "+80"], "invalid address"),
    ("port-space", ["-l", " 80"], "invalid address"),
    ("host-no-port", ["-l", "127.0.0.1:"], "invalid address"),
    ("port-no-host", ["-l", ":80"], "invalid address"),
    ("five-octets", ["-l", "1.2.3.4.5:80"], "invalid address"),
    ("hostname", ["-l", "example.com:80"], "invalid address"),
    ("v6-no-port", ["-l", "[::1]"], "invalid address"),
    ("v6-unclosed", ["-l", "[::1:80"], "invalid address"),
    ("v6-unbracketed", ["-l", "::1:80"], "invalid address"),
    ("v6-bad-scope", ["-l", "[fe80::1%nosuchif0]:0"], "no such network interface"),
    ("unix-empty", ["-l", "unix:"], "invalid address"),
    ("abstract-empty", ["-l", "@"], "invalid address"),
    ("unix-too-long", ["-l", LONG_PATH], "unix socket path too long"),
    ("tcp-path", ["-l", "tcp:/tmp/x"], "invalid address"),
    ("name-colon", ["-l", "a:b=0"], "invalid address"),
    ("name-too-long", ["-l", f"{NAME_256}=0"], "invalid address"),
    ("name-control", ["-l", "a\tb=0"], "invalid address"),
    ("name-empty", ["-l", "=0"], "invalid address"),
    ("format", ["--format=xml"], "--format: 'xml': expected port, addr, url, json or env"),
    ("print-format", ["--print=yaml"], "--print: 'yaml'"),
    ("backlog-zero", ["--backlog=0"], "--backlog: '0'"),
    ("backlog-word", ["--backlog=lots"], "--backlog: 'lots'"),
    ("mode-not-octal", ["--socket-mode=999"], "--socket-mode: '999'"),
    ("mode-too-big", ["--socket-mode=1777"], "--socket-mode: '1777'"),
    ("port-fd-stdout", ["--port-fd=1"], "--port-fd: '1'"),
    ("port-fd-closed", ["--port-fd=987"], "not an open file descriptor"),
    ("port-fd-word", ["--port-fd=x"], "--port-fd: 'x'"),
    ("port-file-empty", ["--port-file="], "--port-file: '': empty path"),
    ("unknown-option", ["--bogus"], "unknown option '--bogus'"),
    ("unknown-short", ["-z"], "unknown option '-z'"),
    ("setenv-no-name", ["-E", "=x"], "missing variable name"),
    ("setenv-protocol", ["-E", "LISTEN_FDS=3"], "this variable is set by prebind"),
    ("template-unknown-socket", ["-E", "X={nope.port}"], "no socket of that name or index"),
    ("template-unknown-field", ["-E", "X={prot}"], "unknown field"),
    ("template-unterminated", ["-E", "X={port"], "bad template"),
    ("template-stray-brace", ["-E", "X=}"], "bad template"),
    ("not-local-address", ["-l", "192.0.2.1:0"], "Cannot assign requested address"),
    ("no-such-dir", ["-l", "/nonexistent-prebind-dir/s"], "No such file or directory"),
    ("port-file-no-dir", ["--port-file=/nonexistent-prebind-dir/port"], "cannot write port file"),
]


@pytest.mark.parametrize("args,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_125_and_leaves_nothing(tmp_path, args, fragment):
    marker = tmp_path / "ran"
    work = tmp_path / "work"
    work.mkdir()
    # A port file and a socket file that a successful start would create,
    # put before the bad option so they would be made first if they could.
    out = run([f"--port-file={work}/port", "-l", f"{work}/first.sock", *args, "--", "touch", str(marker)],
              cwd=work)
    assert out.returncode == 125
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("prebind: ") and fragment in lines[0], lines[0]
    assert out.stdout == ""
    assert not marker.exists()
    assert os.listdir(work) == []


def test_missing_command(tmp_path):
    out = run([f"--port-file={tmp_path}/port"])
    assert out.returncode == 125
    assert out.stderr == "prebind: missing COMMAND (see --help)\n"
    assert os.listdir(tmp_path) == []


def test_missing_option_argument(tmp_path):
    for option in ("-l", "--listen", "--port-file"):
        out = run([f"--port-file={tmp_path}/port", option])
        assert out.returncode == 125
        assert out.stderr == f"prebind: option '{option}' requires an argument (see --help)\n"
    assert os.listdir(tmp_path) == []


def test_subst_bad_template(tmp_path):
    out = run(["--subst", "-l", f"{tmp_path}/s", "--", "echo", "{nope}"])
    assert out.returncode == 125
    assert out.stderr.count("\n") == 1 and "unknown field" in out.stderr
    assert os.listdir(tmp_path) == []


def test_port_file_never_replaces_a_device_symlink_or_directory(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    for path in (fifo, link, tmp_path / "dir", "/dev/null"):
        if str(path).endswith("dir"):
            os.mkdir(path)
        out = run([f"--port-file={path}", "--", "true"])
        assert out.returncode == 125
        assert out.stderr == f"prebind: cannot write port file '{path}': it exists and is not a regular file " \
                             "(left alone)\n"
    assert fifo.is_fifo() and link.is_symlink() and target.read_text() == "keep"
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    assert sorted(os.listdir(tmp_path)) == ["dir", "fifo", "link", "target"]


def test_port_in_use(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        out = run([f"--port-file={tmp_path}/port", "-l", f"{tmp_path}/a.sock", "-l", f"127.0.0.1:{port}",
                   "--", "true"])
    finally:
        s.close()
    assert out.returncode == 125
    assert out.stderr == f"prebind: cannot listen on '127.0.0.1:{port}': Address already in use\n"
    assert os.listdir(tmp_path) == []  # a.sock, bound first, was removed again


def test_help_and_version_exit_0():
    out = run(["--help"])
    assert out.returncode == 0 and out.stdout.startswith("Usage: prebind [OPTION]... [--] COMMAND")
    for option in ("--listen", "--backlog", "--reuseport", "--v6only", "--socket-mode", "--print", "--port-file",
                   "--port-fd", "--format", "--setenv", "--subst", "--exec", "--quiet", "--verbose", "--version"):
        assert option in out.stdout, option
    out = run(["--version"])
    assert out.returncode == 0 and out.stdout.startswith("prebind ")


@pytest.mark.parametrize("args", [["--bogus", "--", "true"], ["-l", "foo", "--", "true"], []],
                         ids=["unknown-option", "bad-address", "missing-command"])
def test_usage_error_with_stderr_a_dead_pipe_is_125_not_sigpipe(tmp_path, args):
    # The reader of stderr is gone before prebind writes its one line: the
    # write fails (EPIPE) and prebind still exits 125; it used to die of
    # SIGPIPE (141 in a shell) before it had blocked any signal.
    r, w = os.pipe()
    os.close(r)
    try:
        # restore_signals (the default): prebind starts with SIGPIPE at its
        # default disposition, as from a shell.
        out = subprocess.run([PREBIND, f"--port-file={tmp_path}/port", *args], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=w, timeout=TIMEOUT)
    finally:
        os.close(w)
    assert out.returncode == 125, out.returncode
    assert os.listdir(tmp_path) == []


def test_command_still_gets_the_default_sigpipe():
    # prebind ignores SIGPIPE for itself; COMMAND, supervised or --exec'd,
    # must find it at its default again (a shell that writes to a closed
    # pipe dies of it): the shell's 'trap' lists no ignored SIGPIPE.
    for mode in ([], ["--exec"]):
        out = run([*mode, "--", "sh", "-c", "trap"])
        assert out.returncode == 0, out.stderr
        assert "PIPE" not in out.stdout, out.stdout

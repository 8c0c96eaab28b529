"""The container case, without a container engine: the static prebind as
PID 1 of a new PID namespace, chrooted (`unshare --root`) into a directory
that holds nothing but prebind and a static server (tests/helpers/
pid1-server.c): no loader, no libc.so, no /proc, /dev or /tmp. There it
publishes (stdout and a port file), passes the socket, reaps an orphan
re-parented to it, forwards SIGTERM sent from outside (as `docker stop`
does), exits with the server's status and removes what it published.

Runs when the prebind under test is static (.ci/run's second pass,
PREBIND_UNDER_TEST=…/prebind-static); a dynamic prebind cannot run in an
empty root, and these tests are skipped for it."""

import json
import os
import shutil
import signal
import subprocess

import pytest

from conftest import BUILD, PREBIND_REAL, TIMEOUT, Prebind, http_get, is_static, need_unshare, wait_for

PID1_SERVER = os.path.abspath(os.environ.get("PID1_SERVER", os.path.join(BUILD, "tests", "helpers", "pid1-server")))

pytestmark = [
    pytest.mark.skipif(not is_static(PREBIND_REAL),
                       reason=f"{PREBIND_REAL} is dynamic: the static build's run covers the empty root"),
    pytest.mark.skipif(os.getuid() != 0, reason="unshare --pid --root needs root"),
]


@pytest.fixture(autouse=True)
def mount_namespace():
    need_unshare("--pid", "--fork", "--kill-child", "--mount")


class Container(Prebind):
    """`unshare --pid --fork --root=ROOT /prebind ARGS`: prebind is PID 1."""

    def __init__(self, root, args):
        self._run(["unshare", "--pid", "--fork", "--kill-child", "--mount", f"--root={root}", "/prebind", *args])

    def children(self, pid):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            return []

    def prebind_pid(self):
        """prebind's pid as the host sees it: unshare's one child."""
        assert wait_for(lambda: self.children(self.pid) or self.proc.poll() is not None), "unshare started nothing"
        return self.children(self.pid)[0]

    def send(self, sig):
        # unshare blocks SIGTERM and SIGINT while it waits: signal PID 1
        # itself, as a container engine does.
        children = self.children(self.pid)
        if children:
            os.kill(children[0], sig)

    def stop(self, sig=signal.SIGTERM, timeout=TIMEOUT):
        if self.proc.poll() is None:
            self.send(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self):
        if self.proc.poll() is None:
            self.send(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # --kill-child: SIGKILL to PID 1 takes the namespace
        super().close()


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def root(tmp_path):
    assert is_static(PID1_SERVER), f"PID1_SERVER={PID1_SERVER!r} must be a static executable"
    root = tmp_path / "root"
    root.mkdir(mode=0o755)
    shutil.copy(PREBIND_REAL, root / "prebind")
    shutil.copy(PID1_SERVER, root / "server")
    assert sorted(os.listdir(root)) == ["prebind", "server"]
    return root


@pytest.fixture
def container(root):
    started = []

    def start(args):
        c = Container(root, args)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()


def test_publishes_and_passes_the_socket_as_pid_1(root, container):
    c = container(["--print=json", "--port-file=/port", "--", "/server"])
    doc = json.loads(c.readline())
    # prebind is PID 1, the server its child, PID 2.
    assert (doc["pid"], doc["child_pid"]) == (1, 2)
    url = doc["sockets"][0]["url"]
    # Each output is written in turn: the file may follow stdout.
    assert wait_for((root / "port").exists)
    assert (root / "port").read_text().split() == [str(doc["sockets"][0]["port"])]
    assert http_get(url) == (200, "pid=2 ppid=1\n")
    assert c.stop() == 0
    assert sorted(os.listdir(root)) == ["prebind", "server"]  # the port file is gone


def test_reaps_an_orphan(container):
    c = container(["--print=url", "--", "/server"])
    url = c.readline()
    prebind = c.prebind_pid()
    assert wait_for(lambda: len(c.children(prebind)) == 1)
    server = c.children(prebind)[0]
    status, body = http_get(url, "/orphan")
    assert status == 200 and body == "pid=2 ppid=1\n"
    # The orphan (its parent exited at once) now belongs to PID 1: prebind.
    assert wait_for(lambda: len(c.children(prebind)) == 2), c.children(prebind)
    orphan = next(p for p in c.children(prebind) if p != server)
    # It exits a second later; unless PID 1 reaps it, it stays a zombie child.
    assert wait_for(lambda: c.children(prebind) == [server]), \
        f"orphan {orphan} not reaped: {[(p, state(p)) for p in c.children(prebind)]}"
    assert state(server) != "Z"
    assert c.stop() == 0


def test_forwards_sigterm_from_outside_and_exits_with_the_server(container):
    c = container(["--print=url", "--", "/server"])
    url = c.readline()
    assert http_get(url)[0] == 200
    prebind = c.prebind_pid()
    # As `docker stop` does: SIGTERM to the container's PID 1, from the host.
    os.kill(prebind, signal.SIGTERM)
    assert c.wait(timeout=TIMEOUT) == 0
    c.close()
    assert "pid1-server: SIGTERM, stopping" in c.err, c.err


def test_command_not_found_in_the_empty_root_is_127(container):
    c = container(["--print=url", "--", "/bin/sh", "-c", "true"])
    assert c.wait(timeout=TIMEOUT) == 127

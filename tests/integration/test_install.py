"""Install and dist: `meson install --destdir` from the build directory
puts the binary, the man page, the units (with the example server they
run) and the bash completion in place; the man page renders without a
warning; the completion loads in bash and completes; `meson dist` makes a
tarball that builds and passes the unit tests.

The build directory is the one that built $PREBIND_BUILT (its grandparent),
whichever binary the other tests run."""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import HERE, PREBIND_BUILT

SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD_DIR = os.path.dirname(os.path.dirname(PREBIND_BUILT))
BUILD_TIMEOUT = 300  # seconds, for each meson step
UNITS = ["prebind-demo.service", "prebind-demo.socket", "prebind-notify-demo.service"]
# bash-completion's main script, for the _command_offset path (Debian's
# package bash-completion; CI installs it).
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


def meson(*args, cwd=None, timeout=BUILD_TIMEOUT):
    out = subprocess.run(["meson", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"meson {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out


def build_options():
    doc = json.loads(meson("introspect", "--buildoptions", BUILD_DIR).stdout)
    return {o["name"]: o["value"] for o in doc}


@pytest.fixture(scope="module")
def opts():
    return build_options()


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("destdir")
    # --no-rebuild: meson test has built everything already, and other
    # tests are running from this build directory.
    meson("install", "-C", BUILD_DIR, "--no-rebuild", "--quiet", "--destdir", str(root))
    return root


def under(root, path):
    """path (absolute, or relative to the prefix) inside the destdir."""
    return os.path.join(str(root), path.lstrip("/"))


def prefixed(opts, *parts):
    return os.path.join(opts["prefix"], *parts)


def installed_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files)


def expected_completion_dir(opts):
    """As completion/meson.build decides it."""
    if opts["bash_completion_dir"]:
        return prefixed(opts, opts["bash_completion_dir"])
    datadir = prefixed(opts, opts["datadir"])
    out = subprocess.run(["pkg-config", f"--define-variable=datadir={datadir}", "--variable=completionsdir",
                          "bash-completion"], capture_output=True, text=True, timeout=30)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip()
    return os.path.join(datadir, "bash-completion", "completions")


def unit_dir(opts):
    """As units/meson.build decides it."""
    return prefixed(opts, opts["systemdsystemunitdir"] or os.path.join("lib", "systemd", "system"))


def expected_files(opts):
    files = {prefixed(opts, opts["bindir"], "prebind"): "binary"}
    if os.path.exists(os.path.join(BUILD_DIR, "man", "prebind.1")):
        files[prefixed(opts, opts["mandir"], "man1", "prebind.1")] = "man page"
    if opts["units"]:
        unitdir = unit_dir(opts)
        for unit in UNITS:
            files[os.path.join(unitdir, unit)] = "unit"
        files[prefixed(opts, opts["libexecdir"], "prebind", "prebind-example-c-server")] = "example server"
    if opts["bash_completion"]:
        files[os.path.join(expected_completion_dir(opts), "prebind")] = "completion"
    files[prefixed(opts, opts["libdir"], "prebind", "libprebind-intercept.so")] = "interposer"
    return files


def test_install_puts_every_file_in_place_and_nothing_else(opts, destdir):
    expected = expected_files(opts)
    # CI builds with the defaults and -Dman=enabled: all four kinds.
    assert sorted(set(expected.values())) == ["binary", "completion", "example server", "interposer", "man page",
                                              "unit"]
    assert installed_files(destdir) == sorted(p.lstrip("/") for p in expected)
    for path, kind in expected.items():
        mode = os.stat(under(destdir, path)).st_mode & 0o777
        assert mode == (0o755 if kind in ("binary", "example server", "interposer") else 0o644), (path, oct(mode))


def test_installed_binary_runs(opts, destdir):
    out = subprocess.run([under(destdir, prefixed(opts, opts["bindir"], "prebind")), "--version"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and re.match(r"prebind \d", out.stdout), out


def test_installed_binary_finds_its_interposer(opts, destdir, tmp_path):
    # Relative to itself: the destdir is not where the prefix says, so a
    # hard-coded path would not be found. The build tree's is not offered.
    env = {k: v for k, v in os.environ.items() if k != "PREBIND_INTERCEPT_LIBRARY"}
    port_file = tmp_path / "port"
    code = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 8000)); s.listen(); "
            "print(s.getsockname()[1], flush=True)")
    out = subprocess.run([under(destdir, prefixed(opts, opts["bindir"], "prebind")), "-q",
                          f"--port-file={port_file}", "--intercept-via=preload", "--intercept=8000", "--",
                          sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] != "8000"  # it got prebind's socket, on a port of the kernel's choosing


def test_installed_units_name_the_installed_programs(opts, destdir):
    unitdir = unit_dir(opts)
    programs = set()
    for unit in UNITS:
        text = open(under(destdir, os.path.join(unitdir, unit))).read()
        assert not re.search(r"@[A-Za-z_]+@", text), f"{unit} is not configured"
        for line in re.findall(r"^ExecStart=(.*)$", text, re.M):
            programs.update(w for w in shlex.split(line.lstrip("-@:+!")) if w.startswith("/"))
    assert programs == {prefixed(opts, opts["bindir"], "prebind"),
                        prefixed(opts, opts["libexecdir"], "prebind", "prebind-example-c-server")}
    for program in programs:
        assert os.access(under(destdir, program), os.X_OK), program


def test_man_page_renders_without_warnings(opts, destdir):
    page = under(destdir, prefixed(opts, opts["mandir"], "man1", "prebind.1"))
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    out = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", page], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    text = out.stdout
    for heading in ("NAME", "SYNOPSIS", "OPTIONS", "WITH SYSTEMD", "EXIT STATUS", "SEE ALSO"):
        assert re.search(rf"^{heading}$", text, re.M), heading
    assert "--ready" in text
    assert max(len(line) for line in text.split("\n")) <= 80
    # And man finds it by name in the installed tree (man1, right name).
    env["MANPATH"] = under(destdir, prefixed(opts, opts["mandir"]))
    out = subprocess.run(["man", "-w", "prebind"], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == page, out


# --- bash completion ----------------------------------------------------


def completion_file(opts, destdir):
    return under(destdir, os.path.join(expected_completion_dir(opts), "prebind"))


def complete(script, words, cwd=None, with_bash_completion=False, env=None):
    """COMPREPLY of prebind's completion function for words (the last one
    is being completed), split as bash splits them: '=' is a word of its
    own."""
    line = " ".join(words)
    prelude = f"source {shlex.quote(BASH_COMPLETION)}\n" if with_bash_completion else ""
    code = prelude + f"""
source {shlex.quote(script)}
COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={shlex.quote(line)}
COMP_POINT={len(line)}
COMPREPLY=()
_prebind
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.split("\n") if w]


def test_completion_loads_in_bash(opts, destdir):
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                          f"source {shlex.quote(completion_file(opts, destdir))} && complete -p prebind"],
                         capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stdout, out.stderr) == (0, "complete -F _prebind prebind\n", "")


def test_completion_completes_options_and_values(opts, destdir, tmp_path):
    script = completion_file(opts, destdir)
    assert complete(script, ["prebind", "--form"]) == ["--format="]
    assert complete(script, ["prebind", "--format", "="]) == ["port", "addr", "url", "json", "env"]
    assert complete(script, ["prebind", "--format", "=", "j"]) == ["json"]
    assert complete(script, ["prebind", "--format", ""]) == ["port", "addr", "url", "json", "env"]
    assert complete(script, ["prebind", "--print", "=", "u"]) == ["url"]
    assert complete(script, ["prebind", "--pr"]) == ["--print", "--print="]
    assert complete(script, ["prebind", "--ready", "=", ""]) == ["infinity"]
    assert complete(script, ["prebind", "-l", ""]) == []
    assert complete(script, ["prebind", "--restart", "=", "on"]) == ["on-failure"]
    # Every option's value as the next word, as the option table says.
    assert complete(script, ["prebind", "--reload", ""]) == ["restart", "overlap"]
    assert complete(script, ["prebind", "--share-linger", "i"]) == ["infinity"]
    assert complete(script, ["prebind", "--ready-log", ""]) == []
    # -E NAME copies NAME from prebind's environment: exported names.
    env = dict(os.environ, PREBIND_TEST_COMPLETION_VAR="1")
    assert complete(script, ["prebind", "-E", "PREBIND_TEST_COMPLETION_"], env=env) == ["PREBIND_TEST_COMPLETION_VAR"]
    (tmp_path / "ports").mkdir()
    (tmp_path / "port.txt").write_text("")
    assert sorted(complete(script, ["prebind", "--port-file", "=", "po"], cwd=tmp_path)) == ["port.txt", "ports"]
    assert sorted(complete(script, ["prebind", "--port-file", "po"], cwd=tmp_path)) == ["port.txt", "ports"]


def test_completion_offers_the_options_of_help(opts, destdir):
    """The same long options as --help: none missing, none gone."""
    help_text = subprocess.run([PREBIND_BUILT, "--help"], capture_output=True, text=True, timeout=30).stdout
    in_help = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))
    offered = {w.split("=")[0] for w in complete(completion_file(opts, destdir), ["prebind", "--"])}
    assert offered - {"--"} == in_help
    short = set(re.findall(r"^  (-[a-zA-Z]),", help_text, re.M))
    assert {w for w in complete(completion_file(opts, destdir), ["prebind", "-"]) if len(w) == 2} - {"--"} == short


def test_completion_hands_over_to_the_command(opts, destdir):
    script = completion_file(opts, destdir)
    # After "--", or at the first word that is not an option or a value.
    for words in (["prebind", "--", "ech"], ["prebind", "-l", "0", "ech"], ["prebind", "-ql", "0", "ech"],
                  ["prebind", "--format", "=", "url", "-E", "X", "ech"]):
        assert "echo" in complete(script, words), words
    # With bash-completion loaded, COMMAND's own completion takes over.
    assert os.path.exists(BASH_COMPLETION), "install Debian's bash-completion"
    assert "echo" in complete(script, ["prebind", "--format", "=", "url", "--", "ech"], with_bash_completion=True)
    assert complete(script, ["prebind", "--print", "--", "ls", "--almost-al"],
                    with_bash_completion=True) == ["--almost-all"]


# --- meson dist -----------------------------------------------------------


def test_dist_tarball_builds_and_passes_the_unit_tests(tmp_path):
    """meson dist works from a git checkout of committed files: clone HEAD,
    make the tarball (without its own test run, which would take the whole
    suite's time), unpack it, build it and run its unit tests. Some
    seconds."""
    if not os.path.isdir(os.path.join(SOURCE_DIR, ".git")):
        pytest.skip("not a git checkout (a dist tarball itself): nothing to make a tarball of")
    clone = tmp_path / "clone"
    out = subprocess.run(["git", "-c", f"safe.directory={SOURCE_DIR}", "clone", "--quiet", "--no-local",
                          SOURCE_DIR, str(clone)], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert out.returncode == 0, out.stderr
    meson("setup", str(clone / "build"), "-Dtests=false", cwd=clone)
    meson("dist", "-C", str(clone / "build"), "--no-tests", "--formats", "gztar")
    (tarball,) = glob.glob(str(clone / "build" / "meson-dist" / "prebind-*.tar.gz"))

    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path / "unpacked", filter="data")
        else:
            tar.extractall(tmp_path / "unpacked")
    top = names[0].split("/")[0]
    for f in ("meson.build", "meson_options.txt", "src/main.c", "man/prebind.1.scd", "completion/prebind.bash.in",
              "units/prebind-demo.socket.in", "examples/c/server.c", "tests/meson.build"):
        assert f"{top}/{f}" in names, f
    assert not [n for n in names if "/.git/" in n or n.endswith("/.git")]

    src = tmp_path / "unpacked" / top
    meson("setup", str(src / "build"), cwd=src)
    meson("compile", "-C", str(src / "build"))
    meson("test", "-C", str(src / "build"), "--suite", "unit", "--print-errorlogs")
    root = tmp_path / "root"
    meson("install", "-C", str(src / "build"), "--no-rebuild", "--quiet", "--destdir", str(root))
    assert any(p.endswith("/bin/prebind") for p in installed_files(root))
    shutil.rmtree(tmp_path / "clone")

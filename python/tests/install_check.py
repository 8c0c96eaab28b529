#!/usr/bin/python3
"""The installed-package path, end to end and offline: build and install
./python with pip into a throwaway virtualenv (over Debian's Python, so
pytest and uvicorn come from Debian packages), then run some of the
plugin's tests there, loaded by its pytest11 entry point only (no -p, no
PYTHONPATH).

    PREBIND=build/src/prebind /usr/bin/python3 python/tests/install_check.py

Works on a copy of python/ in a temporary directory (pip builds in the
tree: build/ and *.egg-info must not land in the checkout) and removes
everything it made. Exit status 0 if all went well."""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
TIMEOUT = 300  # seconds, for each step


def run(argv, **kwargs):
    print("+", " ".join(argv), flush=True)
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=TIMEOUT, **kwargs)
    print(out.stdout, end="", flush=True)
    if out.returncode != 0:
        sys.exit(f"install_check: {argv[0]} exited {out.returncode}")
    return out.stdout


def main():
    prebind = os.environ.get("PREBIND")
    if not prebind:
        sys.exit("install_check: set PREBIND to the prebind binary under test")
    work = tempfile.mkdtemp(prefix="prebind-plugin-install-")
    try:
        copy = os.path.join(work, "python")
        shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns(
            "__pycache__", "build", "*.egg-info", ".pytest_cache"))
        venv = os.path.join(work, "venv")
        # --without-pip: Debian's pip (python3-pip), seen through
        # --system-site-packages, installs into the venv; ensurepip would
        # only copy another pip in, for tens of seconds.
        run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv])
        python = os.path.join(venv, "bin", "python")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")}
        env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1", PREBIND=prebind)
        # --no-index: nothing may come from the network; pytest, the one
        # dependency, must be found installed.
        run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", copy], env=env)

        site = run([python, "-c", "import os, pytest_prebind; print(os.path.dirname(pytest_prebind.__file__))"],
                   env=env, cwd=work).strip()
        if not site.startswith(venv + os.sep):
            sys.exit(f"install_check: pytest_prebind comes from {site}, not from the venv")
        if not os.path.exists(os.path.join(site, "py.typed")):
            sys.exit("install_check: py.typed is not installed")
        entry = run([python, "-c", "from importlib.metadata import entry_points; "
                     "print([e.value for e in entry_points(group='pytest11') if e.name == 'prebind'])"],
                    env=env, cwd=work).strip()
        if entry != "['pytest_prebind.plugin']":
            sys.exit(f"install_check: pytest11 entry point 'prebind' is {entry}")

        # The tests of the copy, against the installed package (src/ is
        # gone: nothing can import pytest_prebind from the tree); the inner
        # sessions (pytester) load it by the entry point too.
        shutil.rmtree(os.path.join(copy, "src"))
        run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
             "tests/test_fixture.py", "tests/test_server.py::test_outside_pytest"],
            env=dict(env, PYTHONDONTWRITEBYTECODE="1"), cwd=copy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("install_check: the installed plugin works")


if __name__ == "__main__":
    main()

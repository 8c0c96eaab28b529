"""The plugin's option table (pytest_prebind._server.OPTIONS) against the
real prebind: every option the plugin can pass is in `prebind --help`,
with a value where it passes one and without where it passes none."""

import inspect
import re
import subprocess

import pytest_prebind
from pytest_prebind import Server
from pytest_prebind._server import EXEC, OPTIONS

from conftest import TIMEOUT

# Per keyword argument, values that between them give every form of its
# option (bare, with a value, repeated).
SAMPLES = {
    "listen": ["0", ["web=0", "udp:0"], {"admin": "@adm"}],
    "setenv": [{"A": "{url}", "HOME": None}],
    "subst": [True],
    "ready": [True, 2.5, "infinity"],
    "ready_timeout": ["3s"],
    "ready_log": ["Ready"],
    "ready_http": [True, "/health"],
    "ready_exec": ["true"],
    "intercept": [8080, ["web=8080"], {"web": 8080}],
    "intercept_via": ["seccomp"],
    "restart": ["on-failure"],
    "group": [True],
    "share": ["pg"],
    "share_linger": ["500ms", "infinity"],
}


def prebind_help():
    """{--flag: how prebind takes a value: "" none, "=" one, "[=" optional}."""
    r = subprocess.run([pytest_prebind.find_prebind(), "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    options = {}
    for line in r.stdout.splitlines():
        m = re.match(r" {2,6}(?:-\w, )?(--[a-z][a-z0-9-]*)(\[=|=)?", line)  # the option column
        if m:
            options[m.group(1)] = m.group(2) or ""
    assert "--help" in options and "--listen" in options, r.stdout
    return options


def passed_arguments():
    """Every prebind option argument the plugin passes for SAMPLES, and its
    own ones (with and without --die-with-parent)."""
    servers = [Server(["x"]), Server(["x"], die_with_parent=False)]
    servers += [Server(["x"], **{keyword: value}) for keyword, values in SAMPLES.items() for value in values]
    return {a for srv in servers for a in srv.argv[1:srv.argv.index("--")]}


def test_every_keyword_option_has_samples_and_a_parameter():
    keywords = [o.keyword for o in OPTIONS if o.keyword is not None]
    assert sorted(keywords) == sorted(SAMPLES)
    parameters = inspect.signature(Server).parameters
    assert [k for k in keywords if parameters.get(k, None) is None or
            parameters[k].kind is not inspect.Parameter.KEYWORD_ONLY] == []


def test_every_option_the_plugin_passes_is_in_prebind_help():
    known = prebind_help()
    assert [o.flag for o in OPTIONS if o.flag not in known] == []
    passed = passed_arguments()
    flags = {a.split("=", 1)[0] for a in passed}
    # The samples reach every option of the table (--exec is only looked for).
    assert {o.flag for o in OPTIONS} - {EXEC.flag} - flags == set()
    wrong = []
    for argument in sorted(passed):
        flag, has_value = argument.split("=", 1)[0], "=" in argument
        if flag not in known:
            wrong.append(f"{argument}: no such option")
        elif has_value and known[flag] == "":
            wrong.append(f"{argument}: {flag} takes no value")
        elif not has_value and known[flag] == "=":
            wrong.append(f"{argument}: {flag} needs a value")
    assert wrong == []

"""-E/--setenv and --subst: the bound addresses reach a server that must
know its own port, in its environment or its arguments."""

import json

from conftest import PROBE, PYTHON, http_get, run, server


def test_setenv_templates_reach_a_real_server(start):
    p = start(["--print=url", "-l", "web=0", "-E", "GREETING=I am {web.url} on port {port}",
               "--", PYTHON, server("stdlib_http.py")])
    url = p.readline()
    port = url.rsplit(":", 1)[1]
    status, body = http_get(url)
    assert f"greeting=I am {url} on port {port} " in body


def test_subst_expands_arguments(start):
    p = start(["--print=url", "--subst", "-l", "api=[::1]:0", "--", PYTHON, server("stdlib_http.py"),
               "--public={api.url}", "port={0.port}", "fd={api.fd}", "{{literal}}"])
    url = p.readline()
    port = url.rsplit(":", 1)[1]
    body = http_get(url)[1]
    assert f"argv=--public={url} port={port} fd=3 {{literal}}\n" in body


def test_without_subst_arguments_are_untouched():
    out = run(["-q", "--", PROBE, "{port}", "{{x}}"])
    assert json.loads(out.stdout)["argv"][-2:] == ["{port}", "{{x}}"]


def test_every_field_and_index_by_name_and_number(tmp_path):
    out = run(["-q", "--subst", "-l", "web=0", "-l", f"ctl={tmp_path}/c.sock", "--", PROBE,
               "{host}|{addr}|{fd}|{name}", "{ctl.port}|{ctl.url}|{1.fd}|{1.name}"])
    argv = json.loads(out.stdout)["argv"]
    fds = {f["fd"]: f for f in json.loads(out.stdout)["fds"]}
    assert argv[-2] == f"127.0.0.1|127.0.0.1:{fds[3]['port']}|3|web"
    assert argv[-1] == f"{tmp_path}/c.sock|unix:{tmp_path}/c.sock|4|ctl"

"""The scenario that started prebind: many parallel workers, each test with
its own uvicorn, each client checking that it reached its own server.

    pytest -n 8 --dist loadgroup tests/test_seed.py     # 8 workers x 20 tests

Each server answers with a token only its test knows and its pid: a
client that reached another test's server (the pick-a-port race) fails.
"""

import uuid

import pytest

from conftest import get, uvicorn

WORKERS = 8
TESTS_PER_WORKER = 20


@pytest.mark.parametrize("group, n", [
    pytest.param(g, n, marks=pytest.mark.xdist_group(f"worker{g}"))
    for g in range(WORKERS) for n in range(TESTS_PER_WORKER)
])
def test_own_server(prebind, group, n):
    token = f"{group}-{n}-{uuid.uuid4().hex}"
    srv = prebind(uvicorn(), setenv={"TOKEN": token})
    status, body = get(srv.url)  # at once: the socket listens already
    assert status == 200
    assert body.split() == [token, str(srv.pid)], f"{srv.url} answered for another test: {body!r}"

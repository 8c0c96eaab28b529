"""The socket listens before the address is published: a client that
connects at once is queued by the kernel until the server accepts, so no
"wait until it answers" loop is needed."""

import time

from conftest import EXAMPLE_C_SERVER, http_get


def test_client_connecting_at_once_is_served_after_a_slow_start(start):
    p = start(["--print=url", "--", EXAMPLE_C_SERVER, "--delay-accept=1"])
    url = p.readline()
    t0 = time.monotonic()
    status, body = http_get(url, timeout=20)  # a single attempt, no retry
    elapsed = time.monotonic() - t0
    assert status == 200 and "hello from prebind example" in body
    # It really waited in the backlog for the server's first accept().
    assert elapsed >= 0.9, elapsed
    assert p.stop() == 0

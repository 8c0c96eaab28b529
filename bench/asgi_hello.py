"""The smallest ASGI app, for bench/run's time-to-first-response benchmark.

Both fixtures run it the same way (`python3 -m uvicorn --app-dir bench
--lifespan off asgi_hello:app`); only how the socket is found differs.
"""


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", b"6")]})
    await send({"type": "http.response.body", "body": b"hello\n"})

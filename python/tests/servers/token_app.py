"""An ASGI app for uvicorn (`uvicorn --fd 3 token_app:app`): every answer
is `TOKEN PID`, so a client can tell that it reached its own server."""

import os

BODY = f"{os.environ.get('TOKEN', '')} {os.getpid()}\n".encode()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})

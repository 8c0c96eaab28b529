"""An ASGI app for uvicorn --fd 3."""

import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = f"uvicorn pid={os.getpid()} path={scope['path']}\n".encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})

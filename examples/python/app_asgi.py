"""An ASGI app for uvicorn, which takes the socket with `--fd 3`:

    prebind --print=url -- python3 -m uvicorn --fd 3 app_asgi:app
"""

import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = f"uvicorn pid={os.getpid()} path={scope['path']}\n".encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

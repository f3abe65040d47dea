"""Pure-ASGI request body limit: bodies over `max_body_bytes` get 413 with a JSON detail.

Pure ASGI (not BaseHTTPMiddleware) so streamed responses such as SSE pass through untouched;
only the request side is counted.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        chunked = False
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
                if declared is not None and declared > self.max_body_bytes:
                    await self._reject(send)
                    return
            elif name == b"transfer-encoding":
                chunked = True
        if not chunked:
            # HTTP/1.1 frames a request body by Content-Length (a longer one is the next
            # request) and a request with neither header has none, so only a chunked body
            # needs counting: the common case skips both wrappers.
            await self.app(scope, receive, send)
            return
        received = 0
        rejected = False
        started = False

        async def limited_receive() -> Message:
            # Over the limit: answer 413 ourselves and tell the app the client went away.
            # Raising instead would not work: FastAPI turns body-read errors into a 400.
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    rejected = True
                    if not started:
                        await self._reject(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if rejected:  # the 413 is already out; drop the app's own answer
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"request body larger than {self.max_body_bytes} bytes"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

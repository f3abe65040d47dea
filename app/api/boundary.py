"""The boundary check: no request carries text or numbers storage cannot hold past this point.

Pure ASGI, in front of routing, so every route - those of today and any added later - gets it
without opting in: the path, the query string and a JSON body are checked with
`app.db.storable` before any endpoint runs. A bad value is a 422 `{"detail": ...}` naming
where it is (never the value), nesting too deep for the JSON parser included; a body that
is not JSON at all (not UTF-8, or holding NaN / Infinity / a number that overflows to
infinity) a 400. The thread-stream WebSocket applies the same check to each frame
(app/api/thread_protocol_ws.py). The body has been read whole
by then, so the connection stays usable, and nothing has been written.

The body check itself is `app.db.storable.body_problem`, which the readers of a body of any
content type (the thread commands, A2A) call too.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.routing import is_json_content_type, read_body, replaying
from app.db.storable import body_problem, text_problem

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def send_json(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def url_problem(scope: Scope) -> str | None:
    """Why the path or query string cannot reach storage, or None."""
    problem = text_problem(scope.get("path", ""))
    if problem:
        return f"path: contains {problem}"
    query: bytes = scope.get("query_string", b"")
    # the query is percent-decoded as UTF-8 with replacement: only a NUL can survive it
    if b"%00" in query or b"\x00" in query:
        return "query: a parameter contains a NUL character"
    return None


def _content_type(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return bytes(value).decode("latin-1")
    return None


class BoundaryCheckMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = url_problem(scope)
        if problem is not None:
            await drain(receive)
            await send_json(send, 422, problem)
            return
        if scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        content_type = _content_type(scope)
        if content_type is not None and not is_json_content_type(content_type):
            await self.app(scope, receive, send)
            return
        raw = await read_body(receive)
        if raw is None:
            return  # the client went away (or the body limit answered already)
        if raw:
            refused = body_problem(raw)
            if refused is not None:
                await send_json(send, *refused)
                return
        # later reads get the disconnect, as the app expects
        await self.app(scope, replaying(raw, receive), send)


async def drain(receive: Receive) -> None:
    """Read a request body we refuse, so the connection can carry the next request."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return

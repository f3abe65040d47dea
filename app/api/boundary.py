"""The boundary check: no request carries text or numbers storage cannot hold past this point.

Pure ASGI, in front of routing, so every route - those of today and any added later - gets it
without opting in: the path, the query string and a JSON body are checked with
`app.db.storable` before any endpoint runs. A bad value is a 422 `{"detail": ...}` naming
where it is (never the value), nesting too deep for the JSON parser included; a body that
is not JSON at all (not UTF-8, or holding NaN / Infinity / a number that overflows to
infinity) a 400. The thread-stream WebSocket applies the same check to each frame
(app/api/thread_protocol_ws.py). The body has been read whole
by then, so the connection stays usable, and nothing has been written.

The common body (ASCII, no `\\u` escape, no number that could overflow) is recognised from
its bytes without being decoded a second time; only the others are parsed and walked.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.routing import is_json_content_type, read_body, replaying
from app.db.storable import MAX_JSON_DEPTH, NOT_FINITE, json_problem, text_problem

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# What can make a decoded body unstorable: an escape (NUL, surrogates), a non-finite constant,
# a 19-digit integer, or a 3-digit positive exponent (1e309 overflows to infinity; smaller or
# negative ones are finite). A false positive (a hex id with "8e123") costs one parse.
_SUSPECT = re.compile(rb"\\u|Infinity|NaN|\d{19}|\d[eE]\+?\d{3}")
NOT_UTF8 = "request body is not valid UTF-8 (raw surrogate or invalid bytes)"


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


def _plainly_storable(raw: bytes) -> bool:
    """Whether the bytes alone show nothing could be unstorable once decoded."""
    return (
        _SUSPECT.search(raw) is None
        and raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH  # cannot nest too deep
    )


def body_problem(raw: bytes) -> tuple[int, str] | None:
    """(status, detail) when a JSON body cannot be stored, or None (malformed JSON is left to
    the route, which answers it as FastAPI does)."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return 400, NOT_UTF8
    if _plainly_storable(raw):
        return None
    try:
        _, problem = json_problem(raw, "body")
    except ValueError:
        return None
    if problem is None:
        return None
    return (400 if NOT_FINITE in problem else 422), problem


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

"""Pure-ASGI middleware: the request body limit, langgraph.json's CORS and logged headers.

Bodies over `max_body_bytes` get 413 with a JSON detail. Pure ASGI (not BaseHTTPMiddleware)
so streamed responses such as SSE pass through untouched; only the request side is counted.
"""

from __future__ import annotations

import json

from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import AuthMiddleware
from app.graphs.http_options import CorsOptions, HeaderPatterns


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


# --- langgraph.json `http.cors` and `http.logging_headers` (installed by app/api/custom_app.py)

LOG_HEADERS_SCOPE_KEY = "graphkeep.log_headers"


def install_cors(app: FastAPI, cors: CorsOptions | None) -> None:
    """`http.cors`: Starlette's CORSMiddleware with the file's options, where graphkeep's own
    (GRAPHKEEP_CORS_ORIGINS) would be - just outside auth, so preflights and 401s carry CORS
    headers. The file's options replace the setting's (two CORS layers would answer twice)."""
    if cors is None:
        return
    entries = app.user_middleware
    entries[:] = [m for m in entries if not _is(m, CORSMiddleware)]
    entries.insert(auth_position(app), Middleware(CORSMiddleware, **cors.kwargs))


def _is(entry: Middleware, cls: type) -> bool:
    factory: object = entry.cls  # a class or a factory; graphkeep adds classes
    return factory is cls


def auth_position(app: FastAPI) -> int:
    """Where graphkeep's auth middleware is in `app.user_middleware` (0 is outermost)."""
    for index, entry in enumerate(app.user_middleware):
        if _is(entry, AuthMiddleware):
            return index
    raise RuntimeError("the auth middleware is not installed")


class LoggingHeadersMiddleware:
    """`http.logging_headers`: puts the selected request headers in the request's scope state,
    where the access log line (app/api/metrics_middleware.py) picks them up. Secret headers
    (credentials, cookies, anything named like a token or key) are never selected."""

    def __init__(self, app: ASGIApp, *, patterns: HeaderPatterns) -> None:
        self.app = app
        self.patterns = patterns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            selected = {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in scope.get("headers", ())
                if self.patterns.selects(name.decode("latin-1"), default_include=False)
            }
            if selected:
                scope.setdefault("state", {})[LOG_HEADERS_SCOPE_KEY] = selected
        await self.app(scope, receive, send)


def install_logging_headers(app: FastAPI, patterns: HeaderPatterns | None) -> None:
    if patterns is not None:
        # outermost (added last): even a request refused by auth is logged with them
        app.add_middleware(LoggingHeadersMiddleware, patterns=patterns)

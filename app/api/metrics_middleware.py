"""Pure-ASGI middleware: request ids for logs, the access log, and HTTP metrics by route template.

Plain ASGI (not BaseHTTPMiddleware) so streaming responses pass through untouched: `send` is
wrapped, never buffered, and an SSE stream is timed until its last chunk.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics
from app.api.auth import PRINCIPAL_SCOPE_KEY
from app.logging import lazy_ids_var, log_context

access_log = logging.getLogger("graphkeep.access")

_KNOWN_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
# Requests no route matched share one label: raw paths would let clients mint series.
UNMATCHED_ROUTE = "<unmatched>"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_UUID = r"([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})"
_THREAD_IN_PATH = re.compile(rf"/threads/{_UUID}(?:/|$)")
_RUN_IN_PATH = re.compile(rf"/runs/{_UUID}(?:/|$)")


def _route_template(scope: Scope) -> str:
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


def _client_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            candidate = bytes(value).decode("latin-1")
            if _REQUEST_ID.match(candidate):
                return candidate
    return None


def _logged_headers(scope: Scope) -> dict[str, Any]:
    selected = scope.get("state", {}).get("graphkeep.log_headers")
    return {"headers": selected} if selected else {}


class ObservabilityMiddleware:
    """Per request: a request id (echoed as X-Request-ID) and the thread / run ids of the path
    bound for every log line, one access log line, and the HTTP metrics by route template,
    method and status. One layer, one wrapped `send`: it runs on every request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # Generated ids: 32 hex digits, a random half per process and a counter (a uuid4 per
        # request cost a system call for entropy nobody needs).
        self._id_prefix = os.urandom(8).hex()
        self._id_counter = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _client_request_id(scope) or f"{self._id_prefix}{next(self._id_counter):016x}"
        raw_id = request_id.encode("latin-1")
        path: str = scope.get("path", "")
        thread = _THREAD_IN_PATH.search(path) if "/threads/" in path else None
        run = _RUN_IN_PATH.search(path) if "/runs/" in path else None
        method = scope.get("method", "GET")
        method = method if method in _KNOWN_METHODS else "OTHER"
        status = 500  # unless a response starts: the app raised
        recorded = False

        def record() -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                elapsed = time.perf_counter() - started
                metrics.observe_http_request(_route_template(scope), method, status, elapsed)

        async def send_observed(message: Message) -> None:
            nonlocal status
            kind = message["type"]
            if kind == "http.response.start":
                status = int(message["status"])
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (b"x-request-id", raw_id)],
                }
            await send(message)
            if kind == "http.response.body" and not message.get("more_body", False):
                record()

        def tenant_from_scope() -> dict[str, str]:
            # Set by the auth middleware (inside this one) once the caller is known.
            principal = scope.get("state", {}).get(PRINCIPAL_SCOPE_KEY)
            tenant = getattr(principal, "tenant_id", None)
            return {"tenant_id": tenant} if isinstance(tenant, str) else {}

        lazy_token = lazy_ids_var.set(tenant_from_scope)
        try:
            with log_context(
                request_id=request_id,
                tenant_id=None,
                thread_id=thread.group(1) if thread else None,
                run_id=run.group(1) if run else None,
            ):
                try:
                    await self.app(scope, receive, send_observed)
                finally:
                    # Also covers a client that disconnected mid-stream and an app that raised.
                    record()
                    # One structured access line per request, with the ids above (replaces
                    # uvicorn's access log, which runs outside this context).
                    if access_log.isEnabledFor(logging.INFO):
                        access_log.info(
                            "request",
                            extra={
                                "method": scope.get("method"),
                                # the route template, not the raw path: a path carries
                                # client values (ids, labels); the ids are bound above
                                "route": _route_template(scope),
                                "status": status,
                                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                                # langgraph.json `http.logging_headers` (app/api/middleware.py)
                                **_logged_headers(scope),
                            },
                        )
        finally:
            lazy_ids_var.reset(lazy_token)

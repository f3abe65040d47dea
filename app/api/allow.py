"""405 answers as the spec documents them: the most specific path template wins.

Starlette routes a request to the first route that matches it fully, so `PATCH
/threads/count` reached `PATCH /threads/{thread_id}` (a 422 for the id "count") although
`/threads/count` is its own path that only takes POST; and a 405 (OPTIONS without CORS, PUT
on /threads/{id}) carried an `Allow` with the methods of one route only, or of a less
specific path. This pure ASGI layer:

- answers 405 for a method a literal path (no parameters) does not take, when a
  parameterised path would otherwise swallow it (one dict lookup per request);
- likewise for a template whose last segment is literal (`/threads/{id}/runs/crons`, POST
  only), which `/threads/{id}/runs/{run_id}` would otherwise swallow as run id "crons": the
  candidates are found by (segment count, last segment), one dict lookup, then a regex or two;
- rewrites the `Allow` of every 405 with the methods of the most specific templates that
  match the path (the methods openapi.json documents for it).
"""

from __future__ import annotations

import json

from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.boundary import drain


def _routes(scope: Scope) -> list[Route]:
    return [r for r in scope["app"].router.routes if isinstance(r, Route) and r.methods]


def path_methods(routes: list[Route], scope: Scope) -> list[str]:
    """The methods of the most specific templates (fewest parameters) matching the path."""
    matching: list[tuple[int, Route]] = []
    for route in routes:
        match, _ = route.matches(scope)  # PARTIAL: the path matches, the method does not
        if match is not Match.NONE:
            matching.append((len(route.param_convertors), route))
    if not matching:
        return []
    fewest = min(params for params, _ in matching)
    methods: list[str] = []
    for params, route in matching:
        if params == fewest:
            for method in sorted(route.methods or ()):
                if method != "HEAD" and method not in methods:
                    methods.append(method)
    return methods


def _allow_header(methods: list[str]) -> tuple[bytes, bytes]:
    return b"allow", ", ".join(methods).encode()


class AllowHeaderMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._literal: dict[str, frozenset[str]] | None = None
        self._tails: dict[tuple[int, str], list[Route]] | None = None

    def _literal_paths(self, scope: Scope) -> dict[str, frozenset[str]]:
        if self._literal is None:  # the routes are final once requests arrive
            literal: dict[str, set[str]] = {}
            for route in _routes(scope):
                if not route.param_convertors:
                    literal.setdefault(route.path, set()).update(route.methods or ())
            self._literal = {path: frozenset(m) for path, m in literal.items()}
        return self._literal

    def _literal_tails(self, scope: Scope) -> dict[tuple[int, str], list[Route]]:
        """Parameterised templates ending in a literal segment, by (segments, last one)."""
        if self._tails is None:
            tails: dict[tuple[int, str], list[Route]] = {}
            for route in _routes(scope):
                last = route.path.rsplit("/", 1)[-1]
                if route.param_convertors and "{" not in last:
                    tails.setdefault((route.path.count("/"), last), []).append(route)
            self._tails = tails
        return self._tails

    def _allowed(self, scope: Scope) -> frozenset[str] | None:
        path: str = scope["path"]
        allowed = self._literal_paths(scope).get(path)
        if allowed is not None:
            return allowed
        candidates = self._literal_tails(scope).get((path.count("/"), path.rsplit("/", 1)[-1]))
        if not candidates:
            return None
        methods: set[str] = set()
        for route in candidates:
            if route.matches(scope)[0] is not Match.NONE:
                methods.update(route.methods or ())
        return frozenset(methods) if methods else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        allowed = self._allowed(scope)
        if allowed is not None and scope["method"] not in allowed | {"HEAD", "OPTIONS"}:
            await drain(receive)  # the connection then carries the next request
            await _method_not_allowed(send, sorted(allowed - {"HEAD"}))
            return

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                methods = path_methods(_routes(scope), scope)
                if methods:
                    headers = [
                        (k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"
                    ]
                    headers.append(_allow_header(methods))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_allow)


async def _method_not_allowed(send: Send, methods: list[str]) -> None:
    body = json.dumps({"detail": "Method Not Allowed"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                _allow_header(methods),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

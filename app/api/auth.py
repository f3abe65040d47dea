"""Who is calling: authentication middleware, read-only enforcement, CORS, /metrics token.

`install_auth(app, settings)` (called once by `create_app`) adds a pure-ASGI middleware (safe
for SSE) that, for every request outside `PUBLIC_PATHS`:

- resolves the caller (`Principal`) or answers 401 `{"detail": ...}` with `WWW-Authenticate`;
- answers 403 when a read-only caller attempts a write (`is_write`);
- stores the principal in the request scope, where `app.state.resolve_principal` (used by
  `app.api.deps.get_principal`) picks it up.

Because the check sits in front of routing, a route that forgets `PrincipalDep` is still
authenticated. Mode `none` (development) treats every caller as tenant `default`, user
`anonymous`, and ignores `x-api-key`: the official SDK sends `LANGSMITH_API_KEY` on its own.

With langgraph.json's `auth.path` (app/auth/custom.py) its `@auth.authenticate` handler
replaces both modes; its `@auth.on` handlers run in app/api/authz.py. Without an authenticate
handler the mode below still authenticates and the `on` handlers see that caller.

Mode `jwt` accepts, in this order:
1. `Authorization: Bearer <jwt>` (see app/auth/tokens.py), or `Authorization: Bearer gk_...`;
2. `x-api-key: gk_...` (the SDK's `api_key=`), only when no Authorization header is sent.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from starlette.datastructures import Headers, QueryParams
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request as StarletteRequest
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.authz_rules import match
from app.api.docs import PUBLIC_DOCS_PATHS
from app.api.errors import is_database_unavailable
from app.api.routing import read_body, replaying
from app.auth.apikeys import authenticate_api_key, looks_like_api_key
from app.auth.console_session import (
    CONSOLE_PREFIX,
    SESSION_ONLY_PATHS,
    is_console_path,
    is_public_console_path,
    session_token,
)
from app.auth.custom import AuthDenied, CustomAuth
from app.auth.principal import ANONYMOUS, Principal
from app.auth.tokens import JWTVerifier
from app.config import Settings
from app.errors import Unauthorized

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
PUBLIC_PATHS = frozenset({"/ok", "/info", "/ready"}) | PUBLIC_DOCS_PATHS
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# POST endpoints that only read: searches, counts, history, version listing, checkpoint reads.
READ_LIKE_POST_SUFFIXES = (
    "/search",
    "/count",
    "/history",
    "/versions",
    "/state/checkpoint",
    "/store/namespaces",
)
EXPOSED_HEADERS = ["x-pagination-total", "x-pagination-next", "content-location"]
PRINCIPAL_SCOPE_KEY = "graphkeep.principal"

MISSING_CREDENTIALS = "missing credentials: send Authorization: Bearer <token> or x-api-key"
INVALID_API_KEY = "invalid or revoked API key"
READ_ONLY = "this credential is read-only"
BAD_METRICS_TOKEN = "a valid metrics bearer token is required"


# JSON-RPC over POST: the JSON-RPC method decides, so the endpoint checks read-only itself
# (app/protocols/mcp.py: tools/list is a read, tools/call needs the write scope)
PROTOCOL_CHECKED_POSTS = frozenset({"/mcp"})


def is_write(method: str, path: str) -> bool:
    """Whether a request changes state (a read-only caller gets 403 for these)."""
    if method.upper() not in WRITE_METHODS:
        return False
    if method.upper() == "POST" and path.rstrip("/") in PROTOCOL_CHECKED_POSTS:
        return False
    if method.upper() == "POST" and path.rstrip("/").endswith(READ_LIKE_POST_SUFFIXES):
        return False
    return True


def _bearer(headers: Headers) -> str | None:
    raw = headers.get("authorization")
    if raw is None:
        return None
    scheme, _, token = raw.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("malformed Authorization header: expected 'Bearer <token>'")
    return token.strip()


class Authenticator:
    """Turns request headers into a Principal for one auth mode."""

    def __init__(
        self, mode: str, verifier: JWTVerifier | None, custom: CustomAuth | None = None
    ) -> None:
        self.mode = mode
        self.verifier = verifier
        # custom auth with an authenticate handler replaces the mode
        self.custom = custom if custom is not None and custom.has_authenticate else None

    @property
    def wants_body(self) -> bool:
        return self.custom is not None and "body" in self.custom.authenticate_params

    async def authenticate(
        self, headers: Headers, scope: Scope, body: bytes | None = None
    ) -> Principal:
        """The caller, or `Unauthorized` (`AuthDenied` from a custom handler). Never echoes
        credentials in the error."""
        if self.custom is not None:
            return await self.custom.authenticate(_provider(headers, scope, body))
        if self.mode == "none":
            return ANONYMOUS
        token = _bearer(headers)
        if token is not None and not looks_like_api_key(token) and self.verifier is not None:
            return self.verifier.verify(token)
        key = token if token is not None else headers.get("x-api-key")
        if not key:
            raise Unauthorized(MISSING_CREDENTIALS)
        principal = await authenticate_api_key(scope["app"].state.graphkeep.engine, key)
        if principal is None:
            raise Unauthorized(INVALID_API_KEY)
        return principal


def _provider(headers: Headers, scope: Scope, body: bytes | None) -> Any:
    """The parameters the official server injects into `@auth.authenticate`, by name."""

    async def provide(name: str) -> Any:
        if name == "request":
            return StarletteRequest(scope)
        if name == "body":
            if not body:
                return None
            try:
                return json.loads(body)
            except (ValueError, RecursionError):  # auth runs before the boundary check
                return None
        if name == "path":
            return scope["path"]
        if name == "method":
            return scope["method"] if scope["type"] == "http" else "GET"
        if name == "path_params":
            found = match(scope.get("method", "GET"), scope["path"])
            return found[1] if found else {}
        if name == "query_params":
            return dict(QueryParams(scope.get("query_string", b"")))
        if name == "headers":
            return dict(scope.get("headers") or [])
        if name == "authorization":
            return headers.get("authorization")
        return scope  # "scope"

    return provide


def _with_console_session(headers: Headers) -> Headers:
    """A console request's headers with its session cookie as the bearer token (an explicit
    Authorization header wins); the token is then verified like any API credential."""
    if headers.get("authorization") is not None:
        return headers
    token = session_token(headers.get("cookie"))
    if token is None:
        return headers
    raw = [(b"authorization", f"Bearer {token}".encode("latin-1", "replace"))]
    return Headers(raw=raw + list(headers.raw))


async def _redirect_to_sign_in(send: Send) -> None:
    location = f"{CONSOLE_PREFIX}/login".encode()
    headers = [(b"location", location), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _send_json(send: Send, status: int, detail: str, headers: dict[str, str]) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def metrics_token_ok(expected: str | None, authorization: str | None) -> bool:
    """Whether `authorization` carries the metrics bearer token (always true when unset).

    Exposed for the metrics endpoint; the auth middleware already applies it to /metrics.
    """
    if not expected:
        return True
    if not authorization:
        return False
    scheme, _, token = authorization.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode(), expected.encode()
    )


class AuthMiddleware:
    """Pure ASGI: authenticates, enforces read-only, guards /metrics; streams pass through."""

    def __init__(
        self, app: ASGIApp, *, authenticator: Authenticator, metrics_token: str | None
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.metrics_token = metrics_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        headers = Headers(scope=scope)
        if path == METRICS_PATH:
            if not metrics_token_ok(self.metrics_token, headers.get("authorization")):
                await _send_json(send, 401, BAD_METRICS_TOKEN, {"WWW-Authenticate": "Bearer"})
                return
        elif is_console_path(path) and not is_public_console_path(path):
            try:
                principal = await self.authenticator.authenticate(
                    _with_console_session(headers), scope
                )
            except (Unauthorized, AuthDenied):
                await _redirect_to_sign_in(send)  # an expired session signs in again
                return
            if principal.read_only and is_write(method, path) and path not in SESSION_ONLY_PATHS:
                await _send_json(send, 403, READ_ONLY, {})
                return
            scope.setdefault("state", {})[PRINCIPAL_SCOPE_KEY] = principal
        elif path not in PUBLIC_PATHS and method != "OPTIONS" and not is_console_path(path):
            body: bytes | None = None
            if self.authenticator.wants_body and method in WRITE_METHODS:
                body = await read_body(receive)
                if body is None:
                    return  # the client went away
                receive = replaying(body, receive)
            try:
                principal = await self.authenticator.authenticate(headers, scope, body)
            except AuthDenied as exc:
                await _send_json(send, exc.status, exc.detail, exc.headers)
                return
            except Unauthorized as exc:
                # RFC 6750: no error code when the request carried no credentials at all
                challenge = 'Bearer realm="graphkeep"'
                if exc.detail != MISSING_CREDENTIALS:
                    challenge += ', error="invalid_token"'
                await _send_json(send, 401, exc.detail, {"WWW-Authenticate": challenge})
                return
            except Exception as exc:
                if not is_database_unavailable(exc):
                    raise
                log.warning("database unavailable during authentication")
                detail = "the database is unavailable; retry shortly"
                await _send_json(send, 503, detail, {"Retry-After": "5"})
                return
            if principal.read_only and is_write(method, path):
                await _send_json(send, 403, READ_ONLY, {})
                return
            scope.setdefault("state", {})[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)


def build_authenticator(settings: Settings, custom: CustomAuth | None = None) -> Authenticator:
    """The authenticator for `settings.auth` (or the custom handler); raises AuthConfigError
    for unusable JWT settings."""
    if settings.auth == "none":
        return Authenticator("none", None, custom)
    verifier = JWTVerifier.from_config(
        algorithms=settings.jwt_algorithms,
        secret=settings.jwt_secret.get_secret_value() if settings.jwt_secret else None,
        public_key_file=settings.jwt_public_key_file,
        jwks_file=settings.jwt_jwks_file,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway_seconds=settings.jwt_leeway_seconds,
        tenant_claim=settings.jwt_tenant_claim,
    )
    return Authenticator("jwt", verifier, custom)


def install_auth(app: FastAPI, settings: Settings, custom: CustomAuth | None = None) -> None:
    """Add the auth middleware and CORS, and the resolver behind `PrincipalDep`."""
    authenticator = build_authenticator(settings, custom)

    async def resolve_principal(request: Request) -> Principal:
        principal = request.scope.get("state", {}).get(PRINCIPAL_SCOPE_KEY)
        if isinstance(principal, Principal):
            return principal
        # a public path that still asked for the caller: authenticate it the same way
        try:
            return await authenticator.authenticate(request.headers, request.scope)
        except AuthDenied as exc:
            raise Unauthorized(exc.detail) from None

    app.state.resolve_principal = resolve_principal
    app.state.authenticator = authenticator  # the console's sign-in verifies a token with it
    metrics_token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    app.add_middleware(AuthMiddleware, authenticator=authenticator, metrics_token=metrics_token)
    if settings.cors_origins:
        # added last, so it wraps the auth middleware: preflights and 401s get CORS headers
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["*"],
            expose_headers=EXPOSED_HEADERS,
        )

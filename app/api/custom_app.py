"""langgraph.json's `http` section applied to the app: `install_http_options(app, settings)`.

Called once by `create_app`, after graphkeep's routes and middleware are in place. The file is
read here (not only by the lifespan) because routes and middleware are fixed before serving.

- `http.app` ("./custom.py:app", a Starlette or FastAPI app), as the official server serves it:
  its routes are matched BEFORE graphkeep's (a custom route with a built-in's path and method
  replaces it), its middleware wraps every route, built-in ones included, and its lifespan runs
  inside graphkeep's. Its own /docs and /openapi.json are dropped (graphkeep's stay, and list
  its FastAPI routes).
- `middleware_order`: `middleware_first` (the default) runs the custom middleware before
  graphkeep's auth; `auth_first` after it.
- `enable_custom_route_auth`: false (the official default) leaves the custom routes public -
  graphkeep's auth middleware is skipped for a request that one of them matches fully; true
  puts them behind the same auth as every built-in route (JWT, API keys).
- `disable_assistants` / `_threads` / `_runs` / `_store` / `_meta`: those routes are removed
  from the app, so they are gone from /openapi.json too (`disable_mcp` / `_a2a` are applied per
  request by app/protocols; `disable_ui`: graphkeep has no /ui routes).
- `mount_prefix`: every route is served under the prefix; a path outside it is 404.
- `cors`, `logging_headers`: app/api/middleware.py; `configurable_headers` and `webhooks.url`:
  app/runs/prepare.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.docs import DOCS_PATH, OAUTH2_REDIRECT_PATH, OPENAPI_PATH, REDOC_PATH
from app.api.middleware import auth_position, install_cors, install_logging_headers
from app.config import Settings
from app.graphs.config import GraphConfigError, ServerConfig, apply_environment, read_config
from app.graphs.http_options import HttpOptions
from app.graphs.registry import EXAMPLES_CONFIG
from app.user_modules import UserModuleError, add_dependency_paths, import_user_module

# Route groups of the `http.disable_*` switches, by path (the official server's groups:
# thread runs and crons belong to runs, not threads).
META_PATHS = frozenset(
    {"/info", "/metrics", OPENAPI_PATH, DOCS_PATH, REDOC_PATH, OAUTH2_REDIRECT_PATH}
)


def route_group(path: str) -> str | None:
    """The `disable_*` switch that removes the route at `path` (None: no switch does)."""
    if path.startswith("/assistants"):
        return "disable_assistants"
    if path.startswith("/runs") or path.startswith("/threads/{thread_id}/runs"):
        return "disable_runs"
    if path.startswith("/threads"):
        return "disable_threads"
    if path.startswith("/store"):
        return "disable_store"
    if path in META_PATHS or path.startswith(f"{DOCS_PATH}/"):
        return "disable_meta"
    return None


def server_config(settings: Settings) -> ServerConfig:
    """The langgraph.json the lifespan will load (the shipped examples when none is set)."""
    return read_config(settings.config_file or EXAMPLES_CONFIG)


def install_http_options(app: FastAPI, settings: Settings) -> None:
    config = server_config(settings)
    options = config.http
    remove_disabled_routes(app, options)
    install_cors(app, options.cors)
    if options.app is not None:
        mount_custom_app(app, load_custom_app(config), options)
    install_logging_headers(app, options.logging_headers)
    if options.mount_prefix:
        app.add_middleware(MountPrefixMiddleware, prefix=options.mount_prefix)  # outermost


def remove_disabled_routes(app: FastAPI, options: HttpOptions) -> None:
    if not options.disabled:
        return
    app.router.routes[:] = [
        route
        for route in app.router.routes
        if not options.is_disabled(route_group(getattr(route, "path", "")) or "")
    ]
    if options.is_disabled("disable_meta"):
        # FastAPI serves /openapi.json and /docs from its own routes when these are set
        app.openapi_url = None
        app.docs_url = None
        app.redoc_url = None


def load_custom_app(config: ServerConfig) -> Starlette:
    """Import `http.app`; a missing file, a failing import or a non-app stops start-up with
    one line naming the target."""
    target = config.http.app or ""
    module_part, _, attr = target.rpartition(":")
    where = str(config.source) if config.source else "config"
    add_dependency_paths(config.base_dir, list(config.dependencies))  # as the graphs see them
    apply_environment(config)
    try:
        module = import_user_module(module_part, config.base_dir, namespace="graphkeep_user_http")
        obj = getattr(module, attr)
    except UserModuleError as exc:
        raise GraphConfigError(f"{where}: `http.app` {target!r}: {exc.detail}") from None
    except AttributeError:
        raise GraphConfigError(
            f"{where}: `http.app` {target!r}: the module has no attribute {attr!r}"
        ) from None
    except Exception as exc:
        raise GraphConfigError(
            f"{where}: `http.app` {target!r}: importing it failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(obj, Starlette):
        raise GraphConfigError(
            f"{where}: `http.app` {target!r} is a {type(obj).__name__}, "
            "not a Starlette or FastAPI app"
        )
    return obj


def _custom_routes(custom: Starlette) -> list[BaseRoute]:
    """The custom app's routes less its own API docs (graphkeep's /docs and /openapi.json
    serve the whole server, custom FastAPI routes included)."""
    own_docs = {
        getattr(custom, name, None)
        for name in ("openapi_url", "docs_url", "redoc_url", "swagger_ui_oauth2_redirect_url")
    } - {None}
    return [r for r in custom.routes if getattr(r, "path", None) not in own_docs]


def mount_custom_app(app: FastAPI, custom: Starlette, options: HttpOptions) -> None:
    routes = _custom_routes(custom)
    app.router.routes[:0] = routes  # first: custom routes win over built-ins
    at = auth_position(app)
    custom_middleware = list(custom.user_middleware)
    if not options.enable_custom_route_auth:
        auth = app.user_middleware[at]
        app.user_middleware[at] = Middleware(PublicRoutesGate, auth=auth, routes=routes)
    if options.middleware_order == "auth_first":
        app.user_middleware[at + 1 : at + 1] = custom_middleware
    else:
        app.user_middleware[at:at] = custom_middleware
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        async with outer(target) as state, custom.router.lifespan_context(custom) as custom_state:
            yield custom_state if custom_state is not None else state

    app.router.lifespan_context = lifespan


class PublicRoutesGate:
    """graphkeep's auth middleware, skipped for a request a custom route matches fully (path
    and method): custom routes are public unless `enable_custom_route_auth` is set, as on the
    official server. Everything else goes through auth unchanged."""

    def __init__(self, app: ASGIApp, *, auth: Middleware, routes: list[BaseRoute]) -> None:
        self.app = app
        self.auth = auth.cls(app, *auth.args, **auth.kwargs)
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and any(
            route.matches(scope)[0] is Match.FULL for route in self.routes
        ):
            await self.app(scope, receive, send)
            return
        await self.auth(scope, receive, send)


class MountPrefixMiddleware:
    """`http.mount_prefix`: strips the prefix before routing; a path outside it is 404."""

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = json.dumps({"detail": f"not found: routes are under {self.prefix}"}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        inner = path[len(self.prefix) :] or "/"
        raw = scope.get("raw_path")
        scope = {
            **scope,
            "path": inner,
            "raw_path": raw[len(self.prefix) :] or b"/" if isinstance(raw, bytes) else raw,
        }
        await self.app(scope, receive, send)

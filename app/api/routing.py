"""How the resource routers are built and put on the app (public FastAPI/Starlette API only)."""

from __future__ import annotations

import email.message
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Message, Receive, Scope, Send


def operation_id(route: APIRoute) -> str:
    """The openapi.json id of a route declared without `operation_id=`: its endpoint's name
    (FastAPI's default appends the path and method, which would change with either)."""
    return route.name


class PrefixChecked(BaseRoute):
    """A route that, once on the app's own router, refuses a request whose path does not
    start and end with the literal text around its template's parameters, before matching.

    The router tries its routes in order on every request, and a route that does not match
    still costs FastAPI's and Starlette's matching: about 1.3 us each here, 74 us for
    `POST /assistants/search`, the 51st route. A template's regular expression is anchored
    at both ends and its literal text before the first parameter and after the last one
    stands as it is, so a path without that prefix or suffix cannot match: refusing it at
    once changes no answer. `mount_flat` sets them on the routes it puts on the app's own
    router, where each is matched with its own path; with a `root_path` the route path is
    not the raw path, and the full match decides. FastAPI's `include_router` matches the
    included route objects themselves, so a router mounted flat must not also be included
    under a prefix (none is).
    """

    path: str
    literal_prefix: str | None = None
    literal_suffix = ""

    def set_literals(self) -> None:
        """The template's text before its first parameter and after its last (all of it,
        and nothing, when it has none)."""
        self.literal_prefix = self.path.split("{", 1)[0]
        self.literal_suffix = self.path.rsplit("}", 1)[1] if "}" in self.path else ""

    def refuses(self, scope: Scope) -> bool:
        prefix = self.literal_prefix
        if prefix is None or scope["type"] != "http" or scope.get("root_path"):
            return False
        path: str = scope["path"]
        return not (path.startswith(prefix) and path.endswith(self.literal_suffix))

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if self.refuses(scope):
            return Match.NONE, {}
        return super().matches(scope)


class FlatRoute(PrefixChecked, APIRoute):
    """The routes of the resource routers (`resource_router`)."""


def resource_router(tag: str) -> APIRouter:
    """The router of one resource module: its tag, stable operation ids."""
    return APIRouter(tags=[tag], generate_unique_id_function=operation_id, route_class=FlatRoute)


def mount_flat(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Put the routers' routes on the app's own router, in order.

    `include_router` nests each router: every request is then matched against each route
    of each router before it, and again inside the one selected (two passes over some 20
    routes, about as much CPU as a small query). The routes were built by the routers
    already (tags, operation ids, handlers), so the app's router holds them directly; it
    matches its `routes` list as it is on each request (Starlette's Router). Each route
    that can (`PrefixChecked`) refuses a path outside its literal prefix and suffix at once.
    """
    for router in routers:
        for route in router.routes:
            if isinstance(route, PrefixChecked):
                route.set_literals()
        app.router.routes.extend(router.routes)


@functools.lru_cache(maxsize=64)
def is_json_content_type(value: str) -> bool:
    """application/json or application/*+json, parsed as FastAPI parses it."""
    message = email.message.Message()
    message["content-type"] = value
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def replaying(raw: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app `raw` once, then the real messages (the disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# --------------------------------------------------------------------------- served first

Model = TypeVar("Model", bound=BaseModel)
# serves a request (with its decoded body, None for a route without one), or returns None to
# have the documented route answer it: a parameter in a spelling only FastAPI should judge
Serve = Callable[[Request, Any], Awaitable[Response | None]]

# The spellings of a boolean query parameter FastAPI (pydantic) reads without question; a
# `Serve` hands any other (yes, on, TRUE, an empty value, garbage) to the documented route.
QUERY_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def json_body(raw: bytes, content_type: str | None, model: type[Model]) -> Model | None:
    """`raw` decoded and validated exactly as FastAPI does it for a single body model
    (`json.loads`, then the model), or None to let FastAPI answer: no body, no or another
    content type (its strict content-type check refuses those), malformed JSON, JSON nested
    too deep for the parser (RecursionError: FastAPI answers 400), an invalid body."""
    if not raw or content_type is None or not is_json_content_type(content_type):
        return None
    try:
        return model.model_validate(json.loads(raw))
    except (ValueError, RecursionError, ValidationError):
        return None


class ServedFirst(PrefixChecked, Route):
    """A hot route served without FastAPI's generic request handler.

    That handler solves the dependency graph (path and query parameters through pydantic
    adapters, one by one), parses the content type through `email.message`, records
    telemetry and endpoint context and opens two exit stacks on every request: about as much
    CPU as the request's own query (bench/api_cpu_bench.py). This route, placed right before
    the documented `APIRoute` of the same path and methods, serves the request itself with
    `serve(request, body)`. A JSON body is decoded as FastAPI does (`json_body`); anything
    else goes to the documented route, so those answers (422, 400, 415...) stay FastAPI's.
    The `APIRoute` still describes the operation in openapi.json; this one is not in it.
    Its parameters are read as FastAPI reads them; one that could fail validation (a boolean,
    a number) is served only in a spelling that cannot (`QUERY_BOOLS`), else `serve` returns
    None and the documented route answers, its 422 included.
    """

    def __init__(self, documented: Route, serve: Serve, body: type[BaseModel] | None) -> None:
        super().__init__(
            documented.path,
            documented.endpoint,  # for introspection; requests are served by `handle`
            methods=sorted(documented.methods or ()),
            name=documented.name,
            include_in_schema=False,
        )
        # exactly the documented methods (Starlette would add HEAD to a GET route)
        self.methods = set(documented.methods or ())
        self._documented = documented.app
        self._serve = serve
        self._body = body

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)  # PrefixChecked's, then Starlette's
        if match is not Match.NONE:
            child["route"] = self  # as an APIRoute: the route template of logs and metrics
        return match, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            await super().handle(scope, receive, send)  # Starlette's 405
            return
        if self._body is None:
            response = await self._serve(Request(scope, receive, send), None)
            if response is None:
                await self._documented(scope, receive, send)
            else:
                await response(scope, receive, send)
            return
        raw = await read_body(receive)
        if raw is None:
            return  # the client went away
        replay = replaying(raw, receive)
        body = json_body(raw, Request(scope).headers.get("content-type"), self._body)
        response = None if body is None else await self._serve(Request(scope, replay, send), body)
        if response is None:
            await self._documented(scope, replay, send)
        else:
            await response(scope, replay, send)


def served_with_body(endpoint: Callable[..., Awaitable[Response]]) -> Serve:
    """`serve` for an endpoint declared as `(<path parameters: str>..., payload, request)`:
    it is called with the path parameters as matched, the decoded body and the request."""

    async def serve(request: Request, payload: Any) -> Response:
        return await endpoint(**request.path_params, payload=payload, request=request)

    return serve


def serve_first(
    router: APIRouter, endpoint: Callable[..., Any], serve: Serve, body: type[BaseModel] | None
) -> None:
    """Put a `ServedFirst` for `endpoint`'s route right before it in `router`."""
    documented = next(
        r for r in router.routes if isinstance(r, APIRoute) and r.endpoint is endpoint
    )
    router.routes.insert(router.routes.index(documented), ServedFirst(documented, serve, body))

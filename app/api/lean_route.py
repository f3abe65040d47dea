"""`LeanRoute`: FastAPI routes whose per-request work is only what our endpoints need.

FastAPI's generic request handler costs about as much CPU as a thread create's INSERT: it
solves the dependency graph (our two dependencies are one attribute read each), parses the
content type through `email.message`, records telemetry and endpoint context, and
serializes the return value. For an endpoint of a known simple shape, a `LeanRoute` builds a
handler that does the same steps directly:

- path and query parameters, and the single JSON body model, are validated by FastAPI's
  own functions (`request_params_to_args`, `request_body_to_args`), so values, defaults and
  the 422 errors are exactly FastAPI's;
- `AppStateDep` and `PrincipalDep` are called directly;
- the endpoint must return a `Response` (declared in its return annotation), which is sent
  as is, as FastAPI does with a returned `Response`.

Any other shape (header or cookie parameters, other dependencies, a form or embedded
bodies, a return value FastAPI serializes, dependency overrides) keeps FastAPI's handler.
The route's OpenAPI description is untouched: it is still an `APIRoute`.
"""

from __future__ import annotations

import email.message
import functools
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, params
from fastapi._compat import ModelField, Undefined
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    _get_param_model,
    request_body_to_args,
    request_params_to_args,
)
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.routing import _effective_route_context_var as effective_route_context
from starlette.requests import Request
from starlette.responses import Response

from app.api.deps import get_app_state, get_principal

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
# the dependencies a lean handler calls itself (each takes the request)
_RESOLVED_HERE: frozenset[Callable[[Request], Awaitable[Any]]] = frozenset(
    {get_app_state, get_principal}
)


def operation_id(route: APIRoute) -> str:
    """Stable ids in openapi.json: the explicit operation_id, else the endpoint's name."""
    return route.name


def resource_router(tag: str) -> APIRouter:
    """The router of one resource module: lean routes, stable operation ids."""
    return APIRouter(tags=[tag], route_class=LeanRoute, generate_unique_id_function=operation_id)


def mount_flat(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Put the routers' routes on the app's own router, in order.

    `include_router` nests each router: every request is then matched against each route
    of each router before it, and again inside the one selected (two passes over some 20
    routes, about as much CPU as a small query). The routes were built by the routers
    already (tags, operation ids, lean handlers), so the app can hold them directly.
    """
    for router in routers:
        app.router.routes.extend(router.routes)
    mark_changed = getattr(app.router, "_mark_routes_changed", None)
    if mark_changed is not None:  # FastAPI caches what it matches against
        mark_changed()


class LeanRoute(APIRoute):
    """An APIRoute that serves simple endpoints through `lean_handler` (see module doc)."""

    def get_route_handler(self) -> Handler:
        standard = super().get_route_handler()
        # Inside `include_router`, FastAPI builds the handler of the route as included (its
        # dependant merged with the router's dependencies) and says which through this var.
        context = effective_route_context.get()
        route: Any = context if context is not None and context.original_route is self else self
        lean = lean_handler(
            route.dependant,
            embed_body_fields=route._embed_body_fields,
            strict_content_type=_strict(route.strict_content_type),
            overrides_provider=route.dependency_overrides_provider,
            standard=standard,
        )
        return lean or standard


def _strict(value: Any) -> bool:
    return bool(getattr(value, "value", value))  # a DefaultPlaceholder holds the default


def lean_handler(
    dependant: Dependant,
    *,
    embed_body_fields: bool,
    strict_content_type: bool,
    overrides_provider: Any,
    standard: Handler,
) -> Handler | None:
    """The lean handler for `dependant`, or None when its shape needs FastAPI's own."""
    call = dependant.call
    if call is None or not inspect.iscoroutinefunction(call) or not _returns_response(call):
        return None
    if (
        dependant.header_params
        or dependant.cookie_params
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.security_scopes_param_name
        or embed_body_fields
        or len(dependant.body_params) > 1
        or any(isinstance(f.field_info, params.Form) for f in dependant.body_params)
    ):
        return None
    injected: list[tuple[str, Callable[[Request], Awaitable[Any]]]] = []
    for sub in dependant.dependencies:
        if sub.call not in _RESOLVED_HERE or sub.name is None or sub.dependencies:
            return None
        injected.append((sub.name, sub.call))
    plain_path, path_params = _split_plain_str(dependant.path_params)
    plain_query, query_params = _split_plain_str(dependant.query_params)
    # the other optional query parameters: absent ones take their default as FastAPI does
    # (without validating it); FastAPI validates only those the request carries
    optional_query = [
        (field, field.alias, field.name, field.field_info.default)
        for field in query_params
        if not field.field_info.is_required()
        and not field.field_info.validate_default
        and field.field_info.validation_alias is None
        and isinstance(field.alias, str)
        and _get_param_model(field) is None
        and isinstance(field.field_info.default, bool | int | float | str | type(None))
    ]
    if len(optional_query) != len(query_params):
        optional_query = []  # mixed with required or model parameters: FastAPI does them all
    body_params = dependant.body_params
    request_param = dependant.request_param_name

    async def handler(request: Request) -> Response:
        if getattr(overrides_provider, "dependency_overrides", None):
            return await standard(request)  # overrides follow FastAPI's own resolution
        values: dict[str, Any] = {}
        errors: list[Any] = []
        body: Any = None
        if plain_path:
            segments = request.path_params
            for name, alias, default in plain_path:
                values[name] = segments.get(alias, default)
        if plain_query:
            query = request.query_params
            for name, alias, default in plain_query:
                values[name] = query.get(alias, default)
        if path_params:
            found, failed = request_params_to_args(path_params, request.path_params)
            values.update(found)
            errors += failed
        if optional_query:
            query = request.query_params
            present = []
            for field, alias, name, default in optional_query:
                if alias in query:
                    present.append(field)
                else:
                    values[name] = default  # immutable, so no copy
            if present:
                found, failed = request_params_to_args(present, query)
                values.update(found)
                errors += failed
        elif query_params:
            found, failed = request_params_to_args(query_params, request.query_params)
            values.update(found)
            errors += failed
        if body_params:
            body = await _read_body(request, strict_content_type)
            found, failed = await request_body_to_args(body_params, body, False)
            values.update(found)
            errors += failed
        if errors:
            raise RequestValidationError(errors, body=body)
        for name, resolve in injected:
            values[name] = await resolve(request)
        if request_param:
            values[request_param] = request
        response: Response = await call(**values)
        return response

    return handler


def _split_plain_str(
    fields: Sequence[ModelField],
) -> tuple[list[tuple[str, str, Any]], list[ModelField]]:
    """(name, alias, default) of the parameters that are plain strings (a path segment, or an
    optional query value defaulting to None or a string: nothing to validate, so FastAPI's
    per-field machinery can be skipped), and the other fields, left to FastAPI."""
    plain: list[tuple[str, str, Any]] = []
    rest: list[ModelField] = []
    for field in fields:
        info = field.field_info
        simple = (
            not info.metadata
            and info.validation_alias is None
            and isinstance(field.alias, str)
            and _get_param_model(field) is None
        )
        if simple and isinstance(info, params.Path) and info.annotation is str:
            plain.append((field.name, field.alias, None))
        elif (
            simple
            and isinstance(info, params.Query)
            and info.annotation in (str, str | None)
            and not info.is_required()
            and (info.default is None or isinstance(info.default, str))
        ):
            plain.append((field.name, field.alias, info.default))
        else:
            rest.append(field)
    return plain, rest


async def _read_body(request: Request, strict_content_type: bool) -> Any:
    """The body as FastAPI would pass it to validation: parsed JSON for a JSON content type
    (or none, when not strict), the raw bytes otherwise, `Undefined` when empty. Malformed
    JSON is a 422; a body that cannot be read or decoded at all (the client went away, the
    body limit cut it, bytes that are not UTF-8) a 400, as FastAPI answers."""
    try:
        raw = await request.body()
        if not raw:
            return Undefined
        content_type = request.headers.get("content-type")
        if content_type is None and strict_content_type:
            return raw
        if content_type is not None and not is_json_content_type(content_type):
            return raw
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
            body=exc.doc,
        ) from exc
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


@functools.lru_cache(maxsize=64)
def is_json_content_type(value: str) -> bool:
    """application/json or application/*+json, parsed as FastAPI parses it."""
    message = email.message.Message()
    message["content-type"] = value
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _returns_response(call: Callable[..., Any]) -> bool:
    try:
        returned = typing.get_type_hints(call).get("return")
    except (NameError, TypeError):
        return False
    return isinstance(returned, type) and issubclass(returned, Response)

"""Templates, the per-request context, forms with their CSRF check, and HTML errors."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import Depends, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import ValidationError

from app import __version__
from app.auth.console_session import (
    CONSOLE_PREFIX,
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    csrf_cookie,
    csrf_ok,
    new_csrf_token,
)
from app.auth.principal import ANONYMOUS, Principal
from app.console.values import human_size, show
from app.db.storable import check_storable
from app.errors import AppError, Conflict, Forbidden, InvalidInput, NotFound, PayloadTooLarge
from app.state import AppState

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
# the error classes the pages answer with their own status; anything else propagates
_STATUS = ((NotFound, 404), (Forbidden, 403), (Conflict, 409), (PayloadTooLarge, 413))
MAX_FORM_FIELD = 1024 * 1024


def _asset_version() -> str:
    """A short hash of the static files: their URLs change when they do (long caching)."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str):
        return value.replace("T", " ")[:19]
    return "" if value is None else str(value)


env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters["show"] = show
env.filters["size"] = human_size
env.filters["when"] = _when
env.globals["prefix"] = CONSOLE_PREFIX
env.globals["asset_version"] = _asset_version()
env.globals["version"] = __version__


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.graphkeep
    return state


async def get_principal(request: Request) -> Principal:
    """The caller, resolved by the auth middleware exactly as for the API (the console's
    session cookie is its credential there)."""
    resolver = getattr(request.app.state, "resolve_principal", None)
    if resolver is None:
        return ANONYMOUS
    principal: Principal = await resolver(request)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def _csrf(request: Request) -> tuple[str, bool]:
    """(token, whether it is new and must be set as a cookie)."""
    found = csrf_cookie(request.headers.get("cookie"))
    return (found, False) if found else (new_csrf_token(), True)


def set_csrf_cookie(response: Response, token: str) -> None:
    # readable by the page's script (it echoes it in a header), never sent cross-site
    response.set_cookie(CSRF_COOKIE, token, path=CONSOLE_PREFIX, samesite="strict", httponly=False)


def page(
    request: Request,
    template: str,
    principal: Principal | None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    token, fresh = _csrf(request)
    auth_on = app_state(request).settings.auth != "none"
    html = env.get_template(template).render(
        request=request,
        principal=principal,
        can_act=principal is not None and not principal.read_only,
        auth_on=auth_on,
        csrf_token=token,
        csrf_field=CSRF_FIELD,
        csrf_header=CSRF_HEADER,
        **context,
    )
    response = HTMLResponse(html, status_code=status_code)
    response.headers["cache-control"] = "no-store"
    if fresh:
        set_csrf_cookie(response, token)
    return response


async def form(request: Request) -> dict[str, str]:
    """A urlencoded form body, after its CSRF token is checked (403 when it does not match)."""
    raw = await request.body()
    try:
        parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise InvalidInput("the form is not UTF-8") from None
    fields = {key: values[-1] for key, values in parsed.items() if values}
    for key, value in fields.items():
        if len(value) > MAX_FORM_FIELD:
            raise PayloadTooLarge(f"form field '{key[:40]}' is too large")
    submitted = request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
    if not csrf_ok(csrf_cookie(request.headers.get("cookie")), submitted):
        raise Forbidden("the form's CSRF token is missing or stale; reload the page")
    # a form is not JSON, so HTTP's boundary check passed it by: the same text rule here
    # (percent-decoding can give a NUL; undecodable bytes became U+FFFD above)
    check_storable(fields, "form")
    return fields


def error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    return page(request, "error.html", None, status_code=status, status=status, detail=detail)


class ConsoleRoute(APIRoute):
    """Domain errors become an HTML page with the same status the API would give."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except ValidationError as exc:
                errors = exc.errors()
                where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
                msg = errors[0]["msg"] if errors else ""
                return error_page(request, 400, f"invalid input {where}: {msg}")
            except InvalidInput as exc:
                return error_page(request, 400, exc.detail)
            except AppError as exc:
                for kind, status in _STATUS:
                    if isinstance(exc, kind):
                        return error_page(request, status, exc.detail)
                raise

        return run

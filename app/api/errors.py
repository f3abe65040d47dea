"""One registry from domain errors to HTTP statuses, with a JSON `detail` string."""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, StatementError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics, redaction
from app.db.sealed import DecryptionFailed
from app.errors import (
    AppError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)

log = logging.getLogger(__name__)

STATUS_BY_ERROR: dict[type[AppError], int] = {
    ValidationFailed: 422,
    InvalidInput: 400,
    NotFound: 404,
    Conflict: 409,
    Unauthorized: 401,
    Forbidden: 403,
    PayloadTooLarge: 413,
    Unavailable: 503,
    # a wrong or missing GRAPHKEEP_ENCRYPTION_KEY: {"detail": ..., "code":
    # "encryption_key_error"}; never a plaintext substitute, not worth a retry
    DecryptionFailed: 500,
    AppError: 500,
}
RETRY_AFTER_SECONDS = "5"


def status_for(exc: AppError) -> int:
    """Walk the MRO, as Starlette does, so subclasses inherit their parent's status."""
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(loc[0] if loc else "request")


def validation_detail(exc: RequestValidationError) -> str:
    messages = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            messages.append(f"malformed JSON body: {err.get('ctx', {}).get('error', '')}".strip())
            continue
        messages.append(f"{_loc(err.get('loc', ()))}: {err.get('msg', 'invalid')}")
    return "; ".join(messages) or "invalid request"


DATABASE_ERRORS: tuple[type[Exception], ...] = (
    PoolTimeout,
    DBAPIError,  # OperationalError, InterfaceError and the driver's untyped errors
    ConnectionError,
    TimeoutError,
)
# SQLSTATEs meaning "this server cannot serve you right now", whatever class the driver maps
# them to: connection exceptions (08xxx), shutting down / crashed / starting up (57P01-57P03,
# e.g. "the database system is starting up" while PostgreSQL recovers), too many connections.
# 57014: a statement cancelled by the serving engine's statement_timeout (a stalled server)
_UNAVAILABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300", "57014")


def _sqlstate(exc: DBAPIError) -> str | None:
    orig = exc.orig
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` means the database cannot be reached right now (answered 503)."""
    if isinstance(exc, PoolTimeout | OperationalError | InterfaceError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        code = _sqlstate(exc)
        return code is not None and code.startswith(_UNAVAILABLE_SQLSTATES)
    return isinstance(exc, ConnectionError | TimeoutError)


def route_template(scope: Scope) -> str:
    """The matched route's template (never the raw path, which carries client values)."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else "<unmatched>"


def log_unexpected(scope: Scope, exc: BaseException) -> None:
    """The log record of a 500: route, method and exception class, plus the stack frames.

    Never the exception's message: a driver's message quotes the statement's values (for
    example asyncpg's "invalid input syntax ... <value>"). Request id and tenant come from
    the request's log context.
    """
    frames = "".join(traceback.format_tb(exc.__traceback__)) if exc.__traceback__ else ""
    log.error(
        "unhandled error",
        extra={
            "route": route_template(scope),
            "method": scope.get("method"),
            "error": type(exc).__name__,
            "stack": frames,
        },
    )


def unexpected_answer(scope: Scope, exc: BaseException) -> tuple[int, str, dict[str, str] | None]:
    """(status, detail, headers) for an exception no handler answered: 503 for an outage,
    500 otherwise; logged without values."""
    if is_database_unavailable(exc):
        metrics.count_db_unavailable()
        log.warning("database unavailable", extra={"error": type(exc).__name__})
        return (
            503,
            "the database is unavailable; retry shortly",
            {"Retry-After": RETRY_AFTER_SECONDS},
        )
    log_unexpected(scope, exc)
    return 500, "internal server error", None


class ServerErrorGuard:
    """Pure ASGI: answers an exception that escaped the app before its response started with
    a JSON 500 (or 503), without re-raising. Starlette's own ServerErrorMiddleware re-raises
    after answering, which makes the server drop the client's keep-alive connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:
                raise  # mid-response: nothing but closing the connection is left
            status, detail, headers = unexpected_answer(scope, exc)
            response = JSONResponse({"detail": detail}, status_code=status, headers=headers)
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    async def app_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AppError)
        status = status_for(exc)
        headers = {"Retry-After": RETRY_AFTER_SECONDS} if status == 503 else None
        body: dict[str, str] = {"detail": redaction.active().text(exc.detail)}
        code = getattr(exc, "code", None)
        if isinstance(code, str):
            body["code"] = code
        if isinstance(exc, DecryptionFailed):
            log.error("stored state cannot be decrypted", extra={"path": request.url.path})
        return JSONResponse(body, status_code=status, headers=headers)

    async def request_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": validation_detail(exc)}, status_code=422)

    async def http_exception(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        status, detail, headers = unexpected_answer(request.scope, exc)
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    async def statement_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StatementError)
        if isinstance(exc.orig, AppError):
            # raised while SQLAlchemy bound a value (JSON that cannot be stored): the
            # caller's error, answered as such
            return await app_error(request, exc.orig)
        return await database_error(request, exc)

    async def database_error(request: Request, exc: Exception) -> JSONResponse:
        if is_database_unavailable(exc):
            return await unexpected(request, exc)
        raise exc  # a real bug (constraint, SQL error): the 500 path below, with its traceback

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_exception)
    app.add_exception_handler(Exception, unexpected)
    # Handlers registered for `Exception` run in Starlette's ServerErrorMiddleware, which
    # re-raises after answering (a traceback per request during an outage). Registering the
    # database error classes themselves answers outages in ExceptionMiddleware instead.
    for db_error in DATABASE_ERRORS:
        app.add_exception_handler(db_error, database_error)
    app.add_exception_handler(StatementError, statement_error)  # DBAPIError's own comes first

"""Logging set-up: JSON lines in production, readable text in development.

Every record carries the ids of the work it belongs to (`request_id`, `tenant_id`,
`thread_id`, `run_id`) from ContextVars: the request-context middleware sets them per HTTP
request, the worker per run (`log_context(...)`). Messages are constant strings with fields in
`extra=`. State values, tokens and keys are never logged; as a second line of defence the
formatters drop `extra` fields whose names say they hold a secret or a state payload.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import Context, ContextVar, Token, copy_context
from datetime import UTC, datetime
from typing import Any, Protocol

from app import redaction

request_id_var: ContextVar[str | None] = ContextVar("graphkeep_request_id", default=None)
tenant_id_var: ContextVar[str | None] = ContextVar("graphkeep_tenant_id", default=None)
thread_id_var: ContextVar[str | None] = ContextVar("graphkeep_thread_id", default=None)
run_id_var: ContextVar[str | None] = ContextVar("graphkeep_run_id", default=None)

# Ids known only later than the context was entered (the tenant, once the auth middleware has
# resolved the caller) come from a callable the request middleware installs; it is asked only
# for ids that are not bound explicitly.
lazy_ids_var: ContextVar[Callable[[], dict[str, str]] | None] = ContextVar(
    "graphkeep_lazy_ids", default=None
)

CONTEXT_VARS: dict[str, ContextVar[str | None]] = {
    "request_id": request_id_var,
    "tenant_id": tenant_id_var,
    "thread_id": thread_id_var,
    "run_id": run_id_var,
}

# `extra` keys never written, whatever a caller passes: credentials and graph state.
REDACTED_FIELDS = frozenset(
    {
        "authorization",
        "token",
        "access_token",
        "api_key",
        "password",
        "secret",
        "jwt_secret",
        "encryption_key",
        "metrics_token",
        "values",
        "input",
        "output",
        "state",
        "command",
        "kwargs",
        "checkpoint",
        "value",
    }
)

# `extra` keys dropped as noise: uvicorn's copy of its message with ANSI colour codes.
DROPPED_FIELDS = frozenset({"color_message"})
# Terminal escape sequences (CSI: colours, cursor moves); no log line carries one.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Alembic announces its dialect and DDL mode at INFO on every MigrationContext, i.e. on
# every readiness probe (which reads the schema revision); the upgrades themselves still log.
_ALEMBIC_CHATTER = frozenset({"Context impl %s.", "Will assume %s DDL."})

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


class LogSettings(Protocol):
    """The part of `app.config.Settings` logging reads (kept structural: no app imports)."""

    @property
    def log_format(self) -> str: ...

    @property
    def log_level(self) -> str: ...


def current_context() -> dict[str, str]:
    """The ids bound in the current context (only those that are set)."""
    out: dict[str, str] = {}
    for name, var in CONTEXT_VARS.items():
        value = var.get()
        if value is not None:
            out[name] = value
    lazy = lazy_ids_var.get()
    if lazy is not None and len(out) < len(CONTEXT_VARS):
        for name, value in lazy().items():
            out.setdefault(name, value)
    return out


def bind(**ids: str | None) -> None:
    """Set ids for the rest of the current context (e.g. the tenant once auth resolved it)."""
    for name, value in ids.items():
        CONTEXT_VARS[name].set(None if value is None else str(value))


@contextmanager
def log_context(**ids: str | None) -> Iterator[None]:
    """Bind ids for the duration of a block and restore the previous ones afterwards."""
    tokens: list[tuple[ContextVar[str | None], Token[str | None]]] = []
    for name, value in ids.items():
        var = CONTEXT_VARS[name]
        tokens.append((var, var.set(None if value is None else str(value))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def context_with(**ids: str | None) -> Context:
    """A copy of the current context with `ids` bound, for `asyncio.create_task(...,
    context=...)`: a worker's run task logs with its run, thread and tenant ids throughout."""
    context = copy_context()
    context.run(bind, **ids)
    return context


def _plain(text: str) -> str:
    return _ANSI_ESCAPE.sub("", text) if "\x1b" in text else text


def _message(record: logging.LogRecord) -> str:
    return _plain(record.getMessage())


def _extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in vars(record).items():
        if key in _RECORD_ATTRS or key.startswith("_") or key in DROPPED_FIELDS:
            continue
        if key.lower() in REDACTED_FIELDS:
            continue
        fields[key] = _plain(value) if isinstance(value, str) else value
    return fields


class _DropAlembicChatter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _ALEMBIC_CHATTER


class ContextFilter(logging.Filter):
    """Copies the bound ids onto each record (explicit `extra` ids win)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current_context().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def format_exception_safely(exc_info: Any) -> str:
    """A traceback without the exceptions' messages: frames and class names only.

    An exception's message is whatever its raiser put there - a driver quotes the values of
    the failed statement, a graph its state - so it never reaches a log line.
    """
    _kind, exc, _tb = exc_info
    if exc is None:
        return ""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = "".join(traceback.format_tb(current.__traceback__))
        lines.append(f"Traceback (most recent call last):\n{frames}{type(current).__qualname__}")
        current = current.__cause__ or current.__context__
    return "\n\nwhich was raised while handling:\n".join(lines)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, ids, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": _message(record),
        }
        payload.update(_extra_fields(record))
        if record.exc_info:
            payload["exc_info"] = format_exception_safely(record.exc_info)
        return redaction.active().text(json.dumps(payload, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...` for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S")
        fields = " ".join(f"{k}={v}" for k, v in _extra_fields(record).items())
        line = f"{stamp} {record.levelname:<7} {record.name}: {_message(record)}"
        if fields:
            line = f"{line} {fields}"
        if record.exc_info:
            line = f"{line}\n{format_exception_safely(record.exc_info)}"
        return redaction.active().text(line)


_HANDLER_NAME = "graphkeep"
PARAMETER_LOGGERS = ("aiosqlite", "asyncpg", "sqlalchemy.engine", "sqlalchemy.pool")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at emit time (as logging's last-resort handler does),
    so redirecting stderr after configure() (test capture, daemon tools) keeps working."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> Any:
        return sys.stderr


def configure(settings: LogSettings) -> None:
    """Install graphkeep's handler on the root logger (idempotent; replaces an earlier one)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(ContextFilter())
    formatter = JsonFormatter() if settings.log_format == "json" else TextFormatter()
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # Loggers that write statements with their bound values (aiosqlite at DEBUG, SQLAlchemy's
    # echo at INFO): WARNING whatever the root level, so a DEBUG log level cannot put the
    # callers' data into the logs.
    for name in PARAMETER_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # uvicorn's own loggers propagate to the root, so they share the format and the ids.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers.clear()
        uv.propagate = True
    chatter = logging.getLogger("alembic.runtime.migration")
    if not any(isinstance(f, _DropAlembicChatter) for f in chatter.filters):
        chatter.addFilter(_DropAlembicChatter())

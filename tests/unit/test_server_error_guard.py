"""An exception that escapes the app is a JSON 500, not re-raised (so the server keeps the
connection), and its log record names route, method and class - never the message."""

from __future__ import annotations

import logging

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from app.api.errors import ServerErrorGuard
from app.logging import format_exception_safely

SECRET = "VALUE-FROM-THE-CALLER"


async def _raising_app(scope: Scope, receive: Receive, send: Send) -> None:
    try:
        raise KeyError(SECRET)
    except KeyError as exc:
        raise RuntimeError(f"wrapped {SECRET}") from exc


async def test_guard_answers_json_500_without_reraising(caplog: pytest.LogCaptureFixture) -> None:
    transport = httpx.ASGITransport(app=ServerErrorGuard(_raising_app))  # raises app errors
    with caplog.at_level(logging.ERROR):
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            r = await client.post("/threads", json={"x": SECRET})
    assert r.status_code == 500 and r.json() == {"detail": "internal server error"}
    (record,) = [rec for rec in caplog.records if rec.getMessage() == "unhandled error"]
    assert record.__dict__["error"] == "RuntimeError"
    assert SECRET not in str(record.__dict__) and record.exc_info is None


def test_tracebacks_are_logged_without_messages() -> None:
    try:
        _raise_chain()
    except RuntimeError as exc:
        text = format_exception_safely((type(exc), exc, exc.__traceback__))
    assert "RuntimeError" in text and "KeyError" in text and "_raise_chain" in text
    assert SECRET not in text


def _raise_chain() -> None:
    try:
        raise KeyError(SECRET)
    except KeyError as exc:
        raise RuntimeError(SECRET) from exc

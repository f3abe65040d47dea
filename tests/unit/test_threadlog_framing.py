"""The replay fast paths frame exactly as the per-event path does: `format_events` against
`format_event` (with and without redaction), and the envelope's direct quoting of ids and
methods against `json.dumps` (strings that need escaping still get it), and raw
created_at values read as the instants UTCDateTime gives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app import redaction
from app.api.sse import format_event, format_events
from app.db.types import utc_from_raw
from app.runs.threadlog.log import LogEvent

FRAMES = [
    ("messages", '{"token":"a","password":"p"}', "1"),
    ("custom", '{"name":"x","data":{"password":"q"}}', "2"),
    ("lifecycle", '{"event":"completed"}', "10000"),
]


@pytest.fixture
def redactor() -> Iterator[None]:
    before = redaction.active()
    redaction.install(redaction.Redactor(["password"]))
    try:
        yield
    finally:
        redaction.install(before)


def test_format_events_is_format_event_joined() -> None:
    assert format_events(FRAMES) == b"".join(format_event(*f) for f in FRAMES)
    assert format_events([]) == b""


def test_format_events_redacts_like_format_event(redactor: None) -> None:
    framed = format_events(FRAMES)
    assert framed == b"".join(format_event(*f) for f in FRAMES)
    assert b'"p"' not in framed and redaction.MASK.encode() in framed


@pytest.mark.parametrize(
    ("event_id", "method"),
    [("17", "messages"), ("9", "input.requested"), ('7"x', "we\\ird\n"), ("1", "métho\u2028d")],
)
def test_envelope_is_valid_json_with_the_stored_parts(event_id: str, method: str) -> None:
    event = LogEvent(
        seq=3,
        event_id=event_id,
        method=method,
        namespace_json='["a:1"]',
        data='{"k":[1,"v"]}',
        timestamp=1700000000123,
    )
    assert json.loads(event.envelope()) == {
        "type": "event",
        "event_id": event_id,
        "seq": 3,
        "method": method,
        "params": {"namespace": ["a:1"], "timestamp": 1700000000123, "data": {"k": [1, "v"]}},
    }


def test_raw_created_at_is_the_same_instant_on_both_dialects() -> None:
    """What the log reader gets for `created_at` read raw (SQLite's text, asyncpg's aware
    datetime in any zone) is the instant UTCDateTime would have given."""
    instant = datetime(2026, 12, 2, 17, 5, 3, 123456, tzinfo=UTC)
    assert utc_from_raw("2026-12-02 17:05:03.123456") == instant
    assert utc_from_raw("2026-12-02 17:05:03") == instant.replace(microsecond=0)
    assert utc_from_raw(instant.astimezone(timezone(timedelta(hours=5)))) == instant
    assert utc_from_raw(instant).tzinfo is UTC

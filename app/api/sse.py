"""SSE framing (contract section 6.1), keep-alives, and the stream query parameters:
Last-Event-ID and `stream_mode`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from app import redaction
from app.errors import ValidationFailed

HEARTBEAT = b": heartbeat\r\n\r\n"
KEEPALIVE_JSON = b"\n"  # leading whitespace is valid JSON; keeps wait/join bodies alive
SSE_HEADERS = {
    "Cache-Control": "no-store",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
SSE_MEDIA_TYPE = "text/event-stream; charset=utf-8"
# 18 digits at most: the sequence fits a BIGINT (a longer id is a 422, not a 500)
_EVENT_ID = re.compile(r"^(?:(\d{1,18})-)?(\d{1,18})$")


def format_event(event: str, data: str, event_id: str | None = None) -> bytes:
    """One event: `event:`, optional `id:`, one `data:` line of compact JSON, blank line.

    The configured sensitive keys are masked here, the one place every stream event leaves
    (run streams, joins, replays, thread streams); stored state keeps them (app/redaction.py).
    """
    redactor = redaction.active()
    if redactor.enabled:
        data = redactor.json_text(data)
        if event == "error":
            data = redactor.text(data)
    head = f"event: {event}\r\n"
    if event_id is not None:
        head += f"id: {event_id}\r\n"
    return f"{head}data: {data}\r\n\r\n".encode()


def format_events(frames: Iterable[tuple[str, str, str]]) -> bytes:
    """`(event, data, event_id)` frames as `format_event` frames them, in one bytes object:
    a replay frames thousands of events per page, so the redactor is looked up and the text
    encoded once per page rather than once per event."""
    redactor = redaction.active()
    if redactor.enabled:
        return b"".join(format_event(event, data, event_id) for event, data, event_id in frames)
    return "".join(
        f"event: {event}\r\nid: {event_id}\r\ndata: {data}\r\n\r\n"
        for event, data, event_id in frames
    ).encode()


def parse_last_event_id(value: str | None) -> int | None:
    """The sequence number after which to replay; None when the header is absent.

    Accepts our ids (`<seq>`), Redis-style `<ms>-<seq>` ids, and `-1` / `0` for "from the
    start". Anything else is a 422.
    """
    if value is None:
        return None
    value = value.strip()
    if value in ("-1", "0", "-", ""):
        return 0
    match = _EVENT_ID.match(value)
    if match is None:
        raise ValidationFailed(f"Last-Event-ID {value!r} is not a valid event id")
    return int(match.group(2))


def requested_modes(values: Iterable[str]) -> set[str]:
    """The stream modes a join asks for: repeated keys, each a comma-separated list or a JSON
    array of names; empty names left out (none at all means the caller's default). A value
    starting with "[" that is not a JSON array (too deep to parse included) is a 422."""
    modes: set[str] = set()
    for value in values:
        value = value.strip()
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                parsed = None
            if not isinstance(parsed, list):
                raise ValidationFailed("stream_mode is not a JSON array of modes")
            modes.update(str(v).strip() for v in parsed)
        else:
            modes.update(v.strip() for v in value.split(","))
    modes.discard("")
    return modes

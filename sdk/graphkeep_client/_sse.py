"""Server-sent events decoding, without I/O: feed bytes, get complete events.

Follows the WHATWG event-stream rules the server relies on: lines end in CRLF, LF or CR (a CR
at the end of one chunk and an LF at the start of the next are one line end), a leading BOM is
dropped, `:` lines are comments (heartbeats), several `data:` lines are joined with `\\n`, and
the `id` persists from event to event until the server sends a new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One dispatched event: name, decoded JSON data (None when empty), and the id its own
    block set (None if it had no `id:` line; the decoder's `last_event_id` still persists)."""

    event: str
    data: Any
    id: str | None


class SSEDecoder:
    """Incremental decoder. `feed()` chunks as they arrive, then `flush()` at the end."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._trailing_cr = False
        self._at_start = True
        self._event = ""
        self._data: list[bytes] = []
        self._has_fields = False
        self._own_id: str | None = None
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[RawEvent]:
        """Decode a chunk; returns the events it completed."""
        if not chunk:
            return []
        if self._trailing_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._trailing_cr = chunk.endswith(b"\r")
        self._buffer.extend(chunk)
        events: list[RawEvent] = []
        while True:
            end = _line_end(self._buffer)
            if end is None:
                break
            stop, skip = end
            line = bytes(self._buffer[:stop])
            del self._buffer[: stop + skip]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[RawEvent]:
        """End of stream: an unterminated last event is dispatched, as browsers do not."""
        events: list[RawEvent] = []
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._line(b"")
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: bytes) -> RawEvent | None:
        if self._at_start:
            self._at_start = False
            line = line.removeprefix(b"\xef\xbb\xbf")
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"event":
            self._event = value.decode(errors="replace")
            self._has_fields = True
        elif name == b"data":
            self._data.append(value)
            self._has_fields = True
        elif name == b"id" and b"\0" not in value:
            self.last_event_id = value.decode(errors="replace") or None
            self._own_id = self.last_event_id
        return None

    def _dispatch(self) -> RawEvent | None:
        if not self._has_fields:
            self._own_id = None
            return None
        body = b"\n".join(self._data)
        event = RawEvent(event=self._event, data=_json(body), id=self._own_id)
        self._event, self._data, self._has_fields, self._own_id = "", [], False, None
        return event


def _line_end(buffer: bytearray) -> tuple[int, int] | None:
    """Index of the first line end in `buffer` and its length (1 or 2), or None."""
    cr, lf = buffer.find(b"\r"), buffer.find(b"\n")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if cr + 1 < len(buffer):
        return cr, 2 if buffer[cr + 1 : cr + 2] == b"\n" else 1
    # A CR at the very end: the line ends here; a following LF is dropped by feed().
    return cr, 1


def _json(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode(errors="replace")

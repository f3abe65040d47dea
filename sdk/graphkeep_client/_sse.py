"""Server-sent events decoding, without I/O: feed bytes, get complete events.

Follows the WHATWG event-stream rules the server relies on: lines end in CRLF, LF or CR (a CR
at the end of one chunk and an LF at the start of the next are one line end), a leading BOM is
dropped, `:` lines are comments (heartbeats), several `data:` lines are joined with `\\n`, and
the `id` persists from event to event until the server sends a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._json import loads

# what a client asks for when it opens an event stream (no cache may hold a live stream)
SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


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
        self._pending = b""
        self._trailing_cr = False
        self._at_start = True
        self._event = ""
        self._data: list[bytes] = []
        self._has_fields = False
        self._own_id: str | None = None
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[RawEvent]:
        """Decode a chunk; returns the events it completed."""
        if self._trailing_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        if not chunk:
            return []
        self._trailing_cr = chunk.endswith(b"\r")
        if self._pending:
            chunk, self._pending = self._pending + chunk, b""
        # bytes.splitlines() splits on exactly the SSE line ends: CRLF, LF and CR.
        lines = chunk.splitlines()
        if chunk[-1] not in b"\r\n":
            self._pending = lines.pop()  # an unfinished line waits for the next chunk
        events: list[RawEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[RawEvent]:
        """End of stream: an unterminated last event is dispatched, as browsers do not."""
        events: list[RawEvent] = []
        if self._pending:
            line, self._pending = self._pending, b""
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._line(b"")
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: bytes) -> RawEvent | None:
        if not line:
            return self._dispatch()
        if self._at_start:
            self._at_start = False
            line = line.removeprefix(b"\xef\xbb\xbf")
        name, _, value = line.partition(b":")
        if not name:
            return None  # a comment line (": heartbeat")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_fields = True
        elif name == b"event":
            self._event = value.decode(errors="replace")
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


def _json(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return loads(body)
    except ValueError:
        return body.decode(errors="replace")

"""Stream events and the bookkeeping that makes a run stream survive a dropped connection.

`StreamResume` holds everything the sync and async stream loops share, without doing I/O:
where to reconnect (the response's `Location`, else the run's join-stream URL), which
`Last-Event-ID` to send and whether a terminal event arrived; which event ids were already
delivered and how long to wait before the next attempt come from `Resume`, as for thread
streams.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ._errors import ProtocolError
from ._models import Interrupt
from ._resume import Resume
from ._sse import RawEvent

_RUN_PATH = re.compile(r"(?:/threads/(?P<thread>[^/]+))?/runs/(?P<run>[^/]+)")
_JOIN_STREAM_PATH = re.compile(r"(?P<run_url>/threads/[^/]+/runs/[^/]+)/stream")
_TERMINAL = ("end", "error")


@dataclass(frozen=True, slots=True)
class RunMetadata:
    """Data of the `metadata` event that opens every run stream."""

    run_id: str
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class StreamError:
    """Data of an `error` event: the exception type name and its message."""

    error: str
    message: str


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event of a run stream.

    `event` is the raw name (`values`, `updates|child:<task>`, `messages/partial`, ...),
    `data` the decoded JSON, `id` the event id (only resumable runs send ids). The properties
    read the common kinds: each returns None when the event is of another kind.
    """

    event: str
    data: Any = None
    id: str | None = None

    @property
    def mode(self) -> str:
        """The stream mode: the name without subgraph namespace or `/partial` suffix."""
        return self.event.split("|", 1)[0].split("/", 1)[0]

    @property
    def namespace(self) -> tuple[str, ...]:
        """Subgraph namespace segments (`node:task_id`); empty for the root graph."""
        return tuple(self.event.split("|")[1:])

    @property
    def is_terminal(self) -> bool:
        """True for `end` and `error`: nothing follows them."""
        return self.event in _TERMINAL

    @property
    def run_metadata(self) -> RunMetadata | None:
        """The run id and attempt, for the `metadata` event."""
        if self.event != "metadata" or not isinstance(self.data, Mapping):
            return None
        return RunMetadata(
            run_id=str(self.data.get("run_id", "")), attempt=int(self.data.get("attempt") or 1)
        )

    @property
    def error(self) -> StreamError | None:
        """The failure, for the `error` event."""
        if self.event != "error":
            return None
        if isinstance(self.data, Mapping):
            return StreamError(
                error=str(self.data.get("error", "Error")),
                message=str(self.data.get("message", "")),
            )
        return StreamError(error="Error", message="" if self.data is None else str(self.data))

    @property
    def values(self) -> dict[str, Any] | None:
        """The full state, for `values` events."""
        return _mapping(self.data) if self.mode == "values" else None

    @property
    def updates(self) -> dict[str, Any] | None:
        """`{node: output}`, for `updates` events."""
        return _mapping(self.data) if self.mode == "updates" else None

    @property
    def messages(self) -> list[dict[str, Any]] | None:
        """Message dicts, for `messages/*` events and `messages` (tuple mode) events.

        `messages/partial` carries the message accumulated so far, `messages/complete` whole
        messages; in tuple mode (`event: messages`) the chunk is the delta. `messages/metadata`
        carries no messages and gives None.
        """
        if self.mode != "messages" or self.event.startswith("messages/metadata"):
            return None
        if not isinstance(self.data, list):
            return None
        if self.event.split("|", 1)[0] == "messages":  # tuple mode: [chunk, metadata]
            return [self.data[0]] if self.data and isinstance(self.data[0], dict) else []
        return [m for m in self.data if isinstance(m, dict)]

    @property
    def custom(self) -> Any:
        """Whatever the node wrote with the stream writer, for `custom` events."""
        return self.data if self.mode == "custom" else None

    @property
    def interrupts(self) -> list[Interrupt]:
        """Interrupts carried by a `values` or `updates` event (`__interrupt__`)."""
        if self.mode not in ("values", "updates") or not isinstance(self.data, Mapping):
            return []
        raw = self.data.get("__interrupt__") or ()
        return [Interrupt.from_json(i) for i in raw if isinstance(i, Mapping)]


def _mapping(data: Any) -> dict[str, Any] | None:
    return dict(data) if isinstance(data, Mapping) else None


class StreamResume(Resume):
    """Reconnect state of one run stream (shared by the sync and async loops)."""

    def __init__(
        self,
        *,
        base_url: httpx.URL,
        thread_id: str | None,
        last_event_id: str | None,
        max_reconnects: int,
        backoff: float,
        max_backoff: float,
    ) -> None:
        super().__init__(max_reconnects=max_reconnects, backoff=backoff, max_backoff=max_backoff)
        self.base_url = base_url
        self.thread_id = thread_id
        self.run_id: str | None = None
        self.last_event_id = last_event_id
        self.reconnect_url: str | None = None
        self.ended = False

    def on_response(self, response: httpx.Response) -> None:
        """Learn from a (re)opened stream's headers where to reconnect."""
        content_location = response.headers.get("content-location")
        if content_location and (match := _RUN_PATH.fullmatch(urlsplit(content_location).path)):
            self.thread_id = match["thread"] or self.thread_id
            self.run_id = match["run"]
        location = response.headers.get("location")
        if location:
            self.reconnect_url = same_origin(self.base_url, location)
        self._derive_reconnect_url()

    def accept(self, raw: RawEvent) -> StreamEvent | None:
        """The event to hand to the caller, or None if it was already delivered."""
        if raw.id is not None:
            self.last_event_id = raw.id
        if not self.first_time(raw.id):
            return None
        event = StreamEvent(event=raw.event, data=raw.data, id=raw.id)
        if event.is_terminal:
            self.ended = True
        if (meta := event.run_metadata) is not None and meta.run_id:
            self.run_id = self.run_id or meta.run_id
            self._derive_reconnect_url()
        return event

    def run_url(self) -> str | None:
        """`/threads/{t}/runs/{r}` when reconnecting to a thread run's join stream."""
        if self.reconnect_url is None:
            return None
        match = _JOIN_STREAM_PATH.fullmatch(urlsplit(self.reconnect_url).path)
        return match["run_url"] if match else None

    def reconnect_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """Headers of a reconnect: the original ones minus the body's, plus Last-Event-ID."""
        out = {
            k: v
            for k, v in headers.items()
            if k.lower() not in ("content-type", "content-length", "last-event-id")
        }
        if self.last_event_id:
            out["Last-Event-ID"] = self.last_event_id
        return out

    def _derive_reconnect_url(self) -> None:
        if self.reconnect_url is None and self.thread_id and self.run_id:
            self.reconnect_url = f"/threads/{self.thread_id}/runs/{self.run_id}/stream"


def same_origin(base_url: httpx.URL, location: str) -> str:
    """Refuse a reconnect target on another origin: it would receive our credentials."""
    target = httpx.URL(location)
    if not target.is_absolute_url:
        return location
    if (target.scheme, target.host, target.port) != (
        base_url.scheme,
        base_url.host,
        base_url.port,
    ):
        raise ProtocolError(f"refusing to follow a Location on another origin: {location}")
    return location

"""What run streams and thread streams share on the wire: one SSE reader (send, refuse an
error answer or a body that is not an event stream, decode events to the end of the body)
and the iterator / context-manager surface over a stream's event generator."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Generic, Self, TypeVar

import httpx

from .._calls import ResponseCheck, raise_for_status
from .._errors import ProtocolError
from .._resume import Resume
from .._sse import RawEvent, SSEDecoder
from ._closing import AsyncClosing

E = TypeVar("E")


async def sse_events(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    refused: ResponseCheck | None = None,
    opened: ResponseCheck | None = None,
) -> AsyncGenerator[RawEvent, None]:
    """Send `request` and yield the events of its `text/event-stream` answer until the body
    ends (an unterminated last event included). An answer of 400 or more is read and raised
    as its APIError (`refused` may raise a more specific error first); `opened` sees the
    headers of a stream before its first event. The connection is closed when the generator
    is (use `aclosing`)."""
    response = await client.send(request, stream=True)
    try:
        if response.status_code >= 400:
            await response.aread()
            if refused is not None:
                refused(response)
            raise_for_status(response)
        content_type = response.headers.get("content-type", "")
        if not content_type.startswith("text/event-stream"):
            raise ProtocolError(f"expected a text/event-stream response, got {content_type!r}")
        if opened is not None:
            opened(response)
        decoder = SSEDecoder()
        async for chunk in response.aiter_bytes():
            for raw in decoder.feed(chunk):
                yield raw
        for raw in decoder.flush():
            yield raw
    finally:
        await response.aclose()


class AsyncEventStream(AsyncClosing, Generic[E]):
    """Iterate the events (`async for event in stream`); use it as a context manager, or
    call `aclose()`, to stop early. Subclasses set `_events` to their event generator and
    `_resume` to its reconnect state."""

    _events: AsyncGenerator[E, None]
    _resume: Resume

    @property
    def reconnects(self) -> int:
        """How many times the stream had to reconnect so far."""
        return self._resume.reconnects

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> E:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the connection (the runs themselves go on)."""
        await self._events.aclose()

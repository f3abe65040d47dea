"""The scripted fake server on httpx.MockTransport and helpers shared by the SDK tests."""

from __future__ import annotations

import inspect
import json
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

BASE_URL = "http://gk.test"

Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class FakeServer:
    """Answers each (method, path) with the next scripted reply and records every request."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self._replies: dict[tuple[str, str], deque[Reply]] = defaultdict(deque)

    def on(self, method: str, path: str, *replies: Reply) -> FakeServer:
        self._replies[(method, path)].extend(replies)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self._replies.get((request.method, request.url.path))
        if not queue:
            return httpx.Response(404, json={"detail": f"no route {request.url.path}"})
        reply = queue.popleft() if len(queue) > 1 else queue[0]
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            try:  # a fresh copy, so one scripted reply can answer many requests
                return httpx.Response(
                    reply.status_code, headers=reply.headers, content=reply.content
                )
            except httpx.ResponseNotRead:  # a streamed body: single use
                return reply
        return reply(request)

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


class CutStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that yields its chunks, then (optionally) breaks like a dropped link."""

    def __init__(self, chunks: list[bytes], *, cut: bool) -> None:
        self._chunks = chunks
        self._cut = cut
        self.closed = False  # the client closed the response (its connection goes back)

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks
        if self._cut:
            raise httpx.RemoteProtocolError("peer closed connection mid-body")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk
        if self._cut:
            raise httpx.RemoteProtocolError("peer closed connection mid-body")


def sse(*events: tuple[str, Any] | tuple[str, Any, str]) -> bytes:
    """Frame events like the server does (CRLF line ends)."""
    out = b""
    for event in events:
        name, data = event[0], event[1]
        if len(event) == 3:
            out += f"id: {event[2]}\r\n".encode()
        out += f"event: {name}\r\ndata: {json.dumps(data)}\r\n\r\n".encode()
    return out


def sse_response(
    chunks: list[bytes], *, cut: bool = False, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream; charset=utf-8", **(headers or {})},
        stream=CutStream(chunks, cut=cut),
    )


async def resolve(value: Any) -> Any:
    """Await the async client's coroutines; pass the sync client's results through."""
    return await value if inspect.isawaitable(value) else value


async def collect(stream: Any) -> list[Any]:
    """All events of a RunStream or AsyncRunStream."""
    if hasattr(stream, "__aiter__"):
        return [event async for event in stream]
    return list(stream)

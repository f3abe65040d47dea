"""A loopback TCP proxy in front of a live server that can cut every open connection at once
(both sides aborted, as a network fault or a load balancer restart does), and that keeps
what each client sent, so a test can read the cursor a reconnect carried."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    sent: bytearray = field(default_factory=bytearray)  # client -> server bytes


class CuttingProxy:
    """`async with CuttingProxy(host, port) as proxy:` then talk to `proxy.url`."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._open: list[_Link] = []
        self.links: list[_Link] = []  # every connection ever made, in order
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    def cut(self) -> int:
        """Abort every open connection (no FIN, no close frame); returns how many."""
        links, self._open = self._open, []
        for link in links:
            for writer in (link.client, link.upstream):
                writer.transport.abort()
        return len(links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        link = _Link(writer, up_writer)
        self._open.append(link)
        self.links.append(link)
        for task in (
            asyncio.create_task(self._pipe(reader, up_writer, link.sent)),
            asyncio.create_task(self._pipe(up_reader, writer, None)),
        ):
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keep: bytearray | None
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if keep is not None:
                    keep.extend(chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()


@contextmanager
def threaded_proxy(host: str, port: int) -> Iterator[tuple[CuttingProxy, Callable[[], int]]]:
    """A CuttingProxy on its own loop in a thread, for the sync client: (proxy, cut)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="cutting-proxy", daemon=True)
    thread.start()
    proxy = CuttingProxy(host, port)

    async def cut() -> int:
        return proxy.cut()

    try:
        asyncio.run_coroutine_threadsafe(proxy.__aenter__(), loop).result(10)
        try:
            yield proxy, lambda: asyncio.run_coroutine_threadsafe(cut(), loop).result(10)
        finally:
            asyncio.run_coroutine_threadsafe(proxy.__aexit__(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def sse_subscriptions(sent: bytes) -> list[dict[str, Any]]:
    """The JSON bodies of the `POST .../stream/events` requests in one connection's bytes."""
    bodies = []
    for match in re.finditer(rb"POST [^ ]*/stream/events HTTP/1\.1\r\n(.*?)\r\n\r\n", sent, re.S):
        length = re.search(rb"(?im)^content-length: *(\d+)", match.group(1))
        assert length is not None, "a subscription without a Content-Length"
        start = match.end()
        bodies.append(json.loads(sent[start : start + int(length.group(1))]))
    return bodies


def websocket_first_message(sent: bytes) -> dict[str, Any] | None:
    """The first text message a WebSocket client sent in one connection's bytes (unmasked,
    inflated when permessage-deflate is on), or None when the connection was no upgrade."""
    head, sep, frames = sent.partition(b"\r\n\r\n")
    if not sep or b"upgrade: websocket" not in head.lower():
        return None
    b0, b1 = frames[0], frames[1]
    length, at = b1 & 0x7F, 2
    if length == 126:
        length, at = int.from_bytes(frames[2:4], "big"), 4
    elif length == 127:
        length, at = int.from_bytes(frames[2:10], "big"), 10
    assert b0 & 0x80 and b1 & 0x80, "a fragmented or unmasked client frame"
    mask, at = frames[at : at + 4], at + 4
    payload = bytes(c ^ mask[i % 4] for i, c in enumerate(frames[at : at + length]))
    if b0 & 0x40:  # RSV1: compressed (the first message of a connection: a fresh context)
        payload = zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")
    message: dict[str, Any] = json.loads(payload)
    return message

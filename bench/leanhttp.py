"""A lean HTTP/1.1 client for the run-throughput benches: keep-alive connections on asyncio
protocols, responses parsed by httptools (uvicorn's parser, already installed).

Why not httpx: at 32 clients httpx itself took 42-45 % of one of this machine's two cores
(about 1.7 ms of CPU per request, measured with `top` while `bench/server_bench.py --measures
thread_wait` ran), CPU the servers under test then could not use. Both servers get this same
client, so the comparison stays fair; `server_bench.py --client httpx` still measures with
httpx. Only what those benches send is supported: a JSON POST (or a GET) with a small answer,
given whole (Content-Length) or chunked (the official server's runs/wait streams keep-alive
blanks before its JSON).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import httptools


class HTTPStatusError(RuntimeError):
    """A status of 400 or more."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser: Any = None
        self._body: list[bytes] = []
        self._answer: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(ConnectionError(f"connection lost: {exc!r}"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        assert self._answer is not None
        if not self._parser.should_keep_alive():
            self.closed = True
        self._answer.set_result((self._parser.get_status_code(), b"".join(self._body)))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._body = []
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._answer


class LeanClient:
    """`await client.post_json(path, body)` -> the decoded JSON answer (raises on >= 400)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._authority = f"{self._host}:{self._port}".encode()
        self._idle: list[_Connection] = []  # open and between requests

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self._host, self._port)
        return conn

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: ".encode()
            + self._authority
            + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(payload)).encode()
            + b"\r\n\r\n"
        )
        conn = await self._connection()
        try:
            status, data = await conn.send(head + payload)
        except BaseException:
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()
            raise
        if not conn.closed:
            self._idle.append(conn)
        return status, data

    async def post_json(self, path: str, body: Any) -> Any:
        status, data = await self.request("POST", path, body)
        if status >= 400:
            raise HTTPStatusError(f"POST {path}: {status} {data[:200]!r}")
        return json.loads(data)

    async def aclose(self) -> None:
        """Close the idle connections (a connection in use closes when its request fails)."""
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()

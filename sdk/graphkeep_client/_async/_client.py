"""The client object: connection settings plus the resource groups."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from .._calls import Call, Timeout, TokenSource, client_options, model
from .._models import Health, ServerInfo
from .._policy import RetryPolicy
from ._assistants import AsyncAssistants
from ._closing import AsyncClosing
from ._crons import AsyncCrons
from ._http import AsyncHTTP
from ._runs import AsyncRuns
from ._store import AsyncStore
from ._threads import AsyncThreads


class AsyncClient(AsyncClosing):
    """Client for a graphkeep server.

        async with AsyncClient("http://127.0.0.1:8123", api_key="...") as client:
            thread = await client.threads.create()
            result = await client.runs.wait(thread.thread_id, "agent", input={...})

    `token` is a bearer token, or a callable returning a fresh one for every request; `api_key`
    is sent as `x-api-key`. `timeout` (seconds or an httpx.Timeout) defaults to 5 s to connect
    and 300 s to read. Requests that are safe to repeat are retried `max_retries` times on
    connection errors, 502/503/504 and 429 (honouring Retry-After), with exponential backoff
    from `backoff` to `max_backoff` seconds; a broken stream reconnects up to
    `stream_reconnects` times in a row. `transport` replaces the network (tests).
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8123",
        *,
        api_key: str | None = None,
        token: TokenSource | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        stream_reconnects: int = 5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        options = client_options(
            url, token=token, api_key=api_key, headers=headers, timeout=timeout
        )
        self._client = httpx.AsyncClient(transport=transport, **options)
        policy = RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff)
        self._http = AsyncHTTP(self._client, policy, stream_reconnects=stream_reconnects)
        self.assistants = AsyncAssistants(self._http)
        self.threads = AsyncThreads(self._http)
        self.runs = AsyncRuns(self._http)
        self.store = AsyncStore(self._http)
        self.crons = AsyncCrons(self._http)

    @property
    def base_url(self) -> str:
        """The server URL every path is relative to."""
        return str(self._client.base_url)

    async def health(self, *, check_db: bool = False) -> Health:
        """`GET /ok`: liveness (with `check_db`, the database is touched too)."""
        params = {"check_db": "1"} if check_db else None
        return await self._http.call(Call("GET", "/ok", _health, params=params))

    async def info(self) -> ServerInfo:
        """`GET /info`: server version and feature flags."""
        return await self._http.call(Call("GET", "/info", _info))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


_health = model(Health.from_json)
_info = model(ServerInfo.from_json)

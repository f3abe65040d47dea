"""Fixtures: a fake server, and every test run against both `Client` and `AsyncClient`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fake_server import BASE_URL, FakeServer

from graphkeep_client import AsyncClient, Client
from graphkeep_client._async import _http as async_http
from graphkeep_client._async import _streams as async_streams
from graphkeep_client._async import _thread_stream as async_thread_stream
from graphkeep_client._sync import _http as sync_http
from graphkeep_client._sync import _streams as sync_streams
from graphkeep_client._sync import _thread_stream as sync_thread_stream


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture(params=["sync", "async"])
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_client(flavour: str, server: FakeServer) -> Callable[..., Any]:
    """Build a Client or AsyncClient (per `flavour`) talking to `server`."""

    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("backoff", 0.0)
        cls = Client if flavour == "sync" else AsyncClient
        client = cls(BASE_URL, transport=httpx.MockTransport(server), **kwargs)
        return client

    return factory


@pytest.fixture
def client(make_client: Callable[..., Any]) -> Any:
    return make_client()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record every backoff wait instead of sleeping."""
    waited: list[float] = []

    def fake_sleep(seconds: float) -> None:
        waited.append(seconds)

    async def fake_async_sleep(seconds: float) -> None:
        waited.append(seconds)

    for module in (sync_http, sync_streams, sync_thread_stream):
        monkeypatch.setattr(module, "_sleep", fake_sleep)
    for module in (async_http, async_streams, async_thread_stream):
        monkeypatch.setattr(module, "_sleep", fake_async_sleep)
    return waited

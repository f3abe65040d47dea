"""Retries with backoff for requests that are safe to repeat, Retry-After, auth headers and
the wait/join reconnect; for both clients."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx
import pytest
from fake_server import CutStream, FakeServer, body_of, resolve

from graphkeep_client import (
    APIError,
    InvalidInput,
    RateLimited,
    RunFailed,
    ServerError,
    TransportError,
)
from graphkeep_client._policy import RetryPolicy, backoff_delay, retry_after

T = "1f0c2d3e-4a5b-7c6d-8e9f-0a1b2c3d4e5f"
R = "1f0c2d3e-aaaa-7c6d-8e9f-0a1b2c3d4e5f"
THREAD = {"thread_id": T, "status": "idle"}


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_get_is_retried_on_gateway_errors(
    status: int, server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on(
        "GET",
        f"/threads/{T}",
        httpx.Response(status, json={"detail": "down"}),
        httpx.Response(status, json={"detail": "down"}),
        httpx.Response(200, json=THREAD),
    )
    thread = await resolve(client.threads.get(T))
    assert thread.thread_id == T
    assert len(server.requests) == 3
    assert len(sleeps) == 2


async def test_connection_errors_are_retried_for_reads(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on(
        "POST",
        "/threads/search",
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        httpx.Response(200, json=[THREAD]),
    )
    threads = await resolve(client.threads.search())
    assert [t.thread_id for t in threads] == [T]
    assert [body_of(r) for r in server.requests] == [{"limit": 10, "offset": 0}] * 3


async def test_run_create_is_not_repeated_after_it_may_have_been_sent(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("POST", f"/threads/{T}/runs", httpx.Response(503, json={"detail": "busy"}))
    with pytest.raises(ServerError, match="busy") as info:
        await resolve(client.runs.create(T, "agent"))
    assert info.value.status == 503
    server.on("POST", f"/threads/{T}/runs/wait", httpx.ReadError("reset"))
    with pytest.raises(TransportError, match="ReadError"):
        await resolve(client.runs.wait(T, "agent"))
    assert len(server.requests) == 2
    assert sleeps == []


async def test_a_connection_that_never_opened_is_retried_even_for_run_create(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    run = {"run_id": R, "thread_id": T, "status": "pending"}
    server.on(
        "POST", f"/threads/{T}/runs", httpx.ConnectError("refused"), httpx.Response(200, json=run)
    )
    created = await resolve(client.runs.create(T, "agent"))
    assert created.run_id == R
    assert len(server.requests) == 2


async def test_create_with_id_and_do_nothing_is_safe_to_repeat(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    bad_gateway = httpx.Response(502)
    server.on("POST", "/threads", bad_gateway, bad_gateway, httpx.Response(200, json=THREAD))
    with pytest.raises(ServerError):  # without an id, a repeat could create a second thread
        await resolve(client.threads.create())
    assert len(server.requests) == 1
    await resolve(client.threads.create(thread_id=T, if_exists="do_nothing"))
    assert len(server.requests) == 3 and len(sleeps) == 1


async def test_429_honours_retry_after_seconds_and_dates(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.on(
        "GET",
        f"/threads/{T}",
        httpx.Response(429, json={"detail": "slow"}, headers={"retry-after": "7"}),
        httpx.Response(429, json={"detail": "slow"}, headers={"retry-after": soon}),
        httpx.Response(200, json=THREAD),
    )
    await resolve(client.threads.get(T))
    assert sleeps[0] == 7.0
    assert 25 < sleeps[1] <= 30


async def test_exhausted_retries_raise_the_last_error(
    server: FakeServer, make_client: Any, sleeps: list[float]
) -> None:
    client = make_client(max_retries=2)
    server.on(
        "GET",
        f"/threads/{T}",
        httpx.Response(429, json={"detail": "slow"}, headers={"retry-after": "1"}),
    )
    with pytest.raises(RateLimited) as info:
        await resolve(client.threads.get(T))
    assert info.value.retry_after == 1.0
    assert len(server.requests) == 3 and sleeps == [1.0, 1.0]

    server.on("GET", "/ok", httpx.ConnectError("refused"))
    with pytest.raises(TransportError, match="GET /ok: ConnectError"):
        await resolve(client.health())


async def test_retry_after_longer_than_the_cap_is_not_waited_out(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on(
        "GET",
        "/ok",
        httpx.Response(503, json={"detail": "maintenance"}, headers={"retry-after": "3600"}),
    )
    with pytest.raises(ServerError, match="maintenance"):
        await resolve(client.health())
    assert sleeps == [] and len(server.requests) == 1


async def test_client_errors_are_never_retried(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    server.on("GET", f"/threads/{T}", httpx.Response(422, json={"detail": "bad id"}))
    with pytest.raises(InvalidInput):
        await resolve(client.threads.get(T))
    assert len(server.requests) == 1


async def test_wait_rereads_the_result_from_location_when_the_body_breaks(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    join = f"/threads/{T}/runs/{R}/join"
    cut = httpx.Response(
        200,
        headers={"location": join, "content-type": "application/json"},
        stream=CutStream([b"\n", b"\n"], cut=True),  # heartbeats, then the link drops
    )
    server.on("POST", f"/threads/{T}/runs/wait", cut)
    server.on("GET", join, httpx.ConnectError("restarting"), httpx.Response(200, json={"n": 3}))
    assert await resolve(client.runs.wait(T, "agent", input={})) == {"n": 3}
    assert [(r.method, r.url.path) for r in server.requests] == [
        ("POST", f"/threads/{T}/runs/wait"),
        ("GET", join),
        ("GET", join),
    ]


async def test_wait_raises_run_failed_or_returns_the_error(server: FakeServer, client: Any) -> None:
    failed = {"__error__": {"error": "ValueError", "message": "bad input"}}
    server.on("POST", f"/threads/{T}/runs/wait", httpx.Response(200, json=failed))
    with pytest.raises(RunFailed, match="ValueError: bad input") as info:
        await resolve(client.runs.wait(T, "agent"))
    assert (info.value.error, info.value.message) == ("ValueError", "bad input")
    assert await resolve(client.runs.wait(T, "agent", raise_error=False)) == failed


async def test_bearer_token_callable_is_asked_on_every_attempt(
    server: FakeServer, make_client: Any, sleeps: list[float]
) -> None:
    issued: list[str] = []

    def token() -> str:
        issued.append(f"t{len(issued)}")
        return issued[-1]

    client = make_client(token=token, api_key="k-1")
    server.on("GET", "/ok", httpx.Response(503), httpx.Response(200, json={"ok": True}))
    await resolve(client.health())
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer t0", "Bearer t1"]
    assert {r.headers["x-api-key"] for r in server.requests} == {"k-1"}


async def test_async_token_callable_works_with_async_client(
    server: FakeServer, flavour: str, make_client: Any
) -> None:
    async def token() -> str:
        return "async-token"

    client = make_client(token=token)
    server.on("GET", "/ok", httpx.Response(200, json={"ok": True}))
    if flavour == "sync":
        with pytest.raises(TypeError, match="AsyncClient"):
            client.health()
    else:
        await client.health()
        assert server.requests[0].headers["authorization"] == "Bearer async-token"


async def test_static_token_and_custom_headers(server: FakeServer, make_client: Any) -> None:
    client = make_client(token="static", headers={"x-user-id": "u1"})
    server.on("GET", "/ok", httpx.Response(200, json={"ok": True}))
    await resolve(client.health())
    sent = server.requests[0]
    assert sent.headers["authorization"] == "Bearer static"
    assert sent.headers["x-user-id"] == "u1"
    assert "x-api-key" not in sent.headers


async def test_a_bad_url_fails_at_once(sleeps: list[float], flavour: str) -> None:
    from graphkeep_client import AsyncClient, Client

    client = (Client if flavour == "sync" else AsyncClient)("ftp://nowhere.test")
    with pytest.raises(TransportError, match="UnsupportedProtocol"):
        await resolve(client.health())
    assert sleeps == []


def test_backoff_grows_and_is_capped() -> None:
    delays = [backoff_delay(n, base=0.5, cap=4.0) for n in range(6)]
    for n, delay in enumerate(delays):
        expected = min(4.0, 0.5 * 2**n)
        assert expected <= delay <= expected * 1.25
    assert RetryPolicy(max_retries=2).retry_delay(2) is None


@pytest.mark.parametrize(
    ("header", "expected"), [("5", 5.0), ("0", 0.0), ("-3", 0.0), ("soon", None), (None, None)]
)
def test_retry_after_parsing(header: str | None, expected: float | None) -> None:
    headers = {"retry-after": header} if header is not None else {}
    assert retry_after(httpx.Response(429, headers=headers)) == expected


def test_timeouts_are_configurable() -> None:
    from graphkeep_client import Client

    assert Client("http://x")._client.timeout.read == 300.0
    custom = Client("http://x", timeout=httpx.Timeout(2.0, read=9.0))
    assert (custom._client.timeout.connect, custom._client.timeout.read) == (2.0, 9.0)
    assert Client("http://x", timeout=1.5)._client.timeout.read == 1.5


def test_api_error_is_the_base_of_status_errors() -> None:
    assert issubclass(RateLimited, APIError) and issubclass(ServerError, APIError)


async def test_a_broken_body_of_a_read_is_retried(
    server: FakeServer, client: Any, sleeps: list[float]
) -> None:
    broken = httpx.Response(
        200, headers={"content-type": "application/json"}, stream=CutStream([b"[{"], cut=True)
    )
    server.on("POST", "/threads/search", broken, httpx.Response(200, json=[THREAD]))
    assert len(await resolve(client.threads.search())) == 1
    assert len(sleeps) == 1


async def test_wait_gives_up_when_its_join_url_stays_unreachable(
    server: FakeServer, make_client: Any, sleeps: list[float]
) -> None:
    client = make_client(max_retries=1)
    join = f"/threads/{T}/runs/{R}/join"
    cut = httpx.Response(200, headers={"location": join}, stream=CutStream([b"\n"], cut=True))
    server.on("POST", f"/threads/{T}/runs/wait", cut)
    server.on("GET", join, httpx.ConnectError("down"))
    with pytest.raises(TransportError, match="ConnectError"):
        await resolve(client.runs.wait(T, "agent"))
    assert len(server.calls("GET", join)) == 1


async def test_client_context_manager_and_base_url(flavour: str, server: FakeServer) -> None:
    from graphkeep_client import AsyncClient, Client

    transport = httpx.MockTransport(server)
    server.on("GET", "/ok", httpx.Response(200, json={"ok": True}))
    if flavour == "sync":
        with Client("http://gk.test/", transport=transport) as client:
            assert client.health(check_db=True).ok
    else:
        async with AsyncClient("http://gk.test/", transport=transport) as client:
            assert (await client.health(check_db=True)).ok
    assert client.base_url == "http://gk.test/"
    assert server.requests[0].url.params["check_db"] == "1"


def test_request_bodies_encode_common_python_types() -> None:
    import uuid
    from datetime import UTC, datetime

    from graphkeep_client._calls import encode_json

    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    uid = uuid.UUID(int=1)
    assert json.loads(encode_json({"u": uid, "t": when, "s": (1, 2)})) == {
        "u": str(uid),
        "t": "2024-01-02T03:04:05+00:00",
        "s": [1, 2],
    }
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        encode_json({"x": object()})

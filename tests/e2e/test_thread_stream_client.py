"""The thread-stream protocol against live `graphkeep serve` processes (JWT auth) on SQLite
and PostgreSQL, through graphkeep-client's `threads.stream` (sync and async, SSE and
WebSocket): values / interrupt / respond / output; idle streams heartbeat on time; a client
that leaves frees its subscription and socket; a subscription whose connection drops mid-run
resumes by itself with `since` (both transports); and (PostgreSQL) a stream cut by SIGTERM of
one server resumes with `since` on another server process, every event exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from graphkeep_client import AsyncClient, Client
from tests.authkit import claims as make_claims
from tests.authkit import hs_token
from tests.conftest import drop_pg_database
from tests.e2e.cutting_proxy import (
    CuttingProxy,
    sse_subscriptions,
    threaded_proxy,
    websocket_first_message,
)
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import Proc, serve
from tests.e2e.test_thread_protocol import AUTH_ENV

pytestmark = pytest.mark.e2e

KEEPALIVE = 0.5
ENV = {**AUTH_ENV, "GRAPHKEEP_STREAM_KEEPALIVE_SECONDS": str(KEEPALIVE)}
ALL = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input"]


@dataclass
class Live:
    proc: Proc
    db_url: str
    tmp: Path
    dialect: str

    @property
    def url(self) -> str:
        assert self.proc.url is not None
        return self.proc.url

    def token(self, tenant: str = "tc-a") -> str:
        return hs_token(make_claims(tenant=tenant, sub=f"{tenant}-user", ttl=3600))


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"thread_stream_client_{dialect}")
    db_url = fresh_database(dialect, tmp)
    try:
        with ExitStack() as stack:
            proc = stack.enter_context(serve(db_url, tmp, workers=2, env=ENV))
            yield Live(proc, db_url, tmp, dialect)
    finally:
        if dialect == "postgres":
            drop_pg_database(db_url)


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_async_client_values_interrupt_respond_output(live: Live, transport: str) -> None:
    async with (
        AsyncClient(live.url, token=live.token()) as client,
        client.threads.stream(assistant_id="asker", transport=transport) as thread,  # type: ignore[arg-type]
    ):
        started = await thread.run.start(input={"question": "ok?"})
        assert started["run_id"]
        snaps = [s async for s in thread.values]
        assert {"question": "ok?"} in snaps
        assert thread.interrupted and len(thread.interrupts) == 1
        await thread.run.respond("yes")
        out = await asyncio.wait_for(thread.output, 20)
    assert out == {"question": "ok?", "answer": "yes!"}


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_sync_client_values_interrupt_respond_output(live: Live, transport: str) -> None:
    with (
        Client(live.url, token=live.token()) as client,
        client.threads.stream(assistant_id="asker", transport=transport) as thread,  # type: ignore[arg-type]
    ):
        thread.run.start(input={"question": "sync?"})
        snaps = list(thread.values)
        assert {"question": "sync?"} in snaps and thread.interrupted
        thread.run.respond("sure")
        assert thread.output == {"question": "sync?", "answer": "sure!"}
        # a second subscription replays the whole log: same seqs, each event once
        events = thread.subscribe(["lifecycle"], since=0)
        seen: list[dict[str, Any]] = []
        for event in events:
            seen.append(event)
            if sum(e["params"]["data"]["event"] == "completed" for e in seen) == 1:
                break
        events.close()
    roots = [e["params"]["data"]["event"] for e in seen if not e["params"]["namespace"]]
    assert roots == ["running", "interrupted", "running", "completed"]
    assert len({e["event_id"] for e in seen}) == len(seen)


def _is_root_completed(event: dict[str, Any]) -> bool:
    return (
        event["method"] == "lifecycle"
        and not event["params"]["namespace"]
        and event["params"]["data"]["event"] == "completed"
    )


async def _read_until(
    events: Any, last: Callable[[dict[str, Any]], bool], timeout: float
) -> list[dict[str, Any]]:
    """A subscription's events up to and including the first `last` one; then closes it."""
    got: list[dict[str, Any]] = []

    async def read() -> None:
        async for event in events:
            got.append(event)
            if last(event):
                return

    await asyncio.wait_for(read(), timeout)
    await events.aclose()
    return got


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_client_resumes_with_since_after_a_dropped_connection(
    live: Live, transport: str
) -> None:
    """The client's own subscription loses its connection mid-run (a proxy aborts every
    connection, no FIN, no close frame) and reopens it by itself with `since` = the highest
    seq it delivered: every event once, none missing, the same as the log replayed from 0."""
    host, port = live.url.removeprefix("http://").rsplit(":", 1)
    tid = str(uuid.uuid4())
    async with (
        CuttingProxy(host, int(port)) as proxy,
        AsyncClient(proxy.url, token=live.token()) as client,
    ):
        thread = client.threads.stream(tid, assistant_id="steps", transport=transport)  # type: ignore[arg-type]
        await thread.run.start(input={"trail": [], "sleep": 2})
        events = thread.subscribe(ALL)
        cut_at: int | None = None

        def cut_after_first(event: dict[str, Any]) -> bool:
            nonlocal cut_at
            if cut_at is None:
                cut_at = events.since
                assert proxy.cut() >= 1
            return _is_root_completed(event)

        got = await _read_until(events, cut_after_first, 60)
        assert events.reconnects >= 1
    await _check_resumed(live, proxy, transport, tid, got, cut_at)


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_sync_client_resumes_with_since_after_a_dropped_connection(
    live: Live, transport: str
) -> None:
    """The same through the generated sync client (httpx and websockets' sync clients)."""
    host, port = live.url.removeprefix("http://").rsplit(":", 1)
    tid = str(uuid.uuid4())
    got: list[dict[str, Any]] = []
    cut_at: int | None = None
    with (
        threaded_proxy(host, int(port)) as (proxy, cut),
        Client(proxy.url, token=live.token()) as client,
    ):
        thread = client.threads.stream(tid, assistant_id="steps", transport=transport)  # type: ignore[arg-type]
        thread.run.start(input={"trail": [], "sleep": 2})
        events = thread.subscribe(ALL)
        for event in events:
            got.append(event)
            if cut_at is None:
                cut_at = events.since
                assert cut() >= 1
            if _is_root_completed(event):
                break
        events.close()
        assert events.reconnects >= 1
    asyncio.run(_check_resumed(live, proxy, transport, tid, got, cut_at))


async def _check_resumed(
    live: Live,
    proxy: CuttingProxy,
    transport: str,
    tid: str,
    got: list[dict[str, Any]],
    cut_at: int | None,
) -> None:
    """What a subscription cut after its first event delivered, and what it asked for."""
    assert cut_at is not None and got and _is_root_completed(got[-1])
    assert not _is_root_completed(got[0]), "the run ended before the cut: nothing to resume"
    # what each subscription connection asked for, in order: the first without a cursor, the
    # reconnect with the highest seq delivered before it (at or after the cut)
    if transport == "sse":
        asked = [body for link in proxy.links for body in sse_subscriptions(bytes(link.sent))]
        assert "since" not in asked[0]
        resumed = [body["since"] for body in asked[1:]]
    else:
        firsts = [websocket_first_message(bytes(link.sent)) for link in proxy.links]
        frames = [f for f in firsts if f is not None]
        assert frames[0]["method"] == "subscription.subscribe"
        assert "since" not in frames[0]["params"]
        assert all(f["method"] == "subscription.reconnect" for f in frames[1:])
        resumed = [f["params"]["since"] for f in frames[1:]]
    seqs = [e["seq"] for e in got]
    assert resumed and resumed[0] >= cut_at and resumed[0] in seqs, (resumed, cut_at, seqs)
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    ids = [e["event_id"] for e in got]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    assert any(s > resumed[0] for s in seqs), "nothing arrived after the reconnect"
    async with AsyncClient(live.url, token=live.token()) as client:
        full = client.threads.stream(tid, assistant_id="steps").subscribe(ALL, since=0)
        whole = await _read_until(full, lambda e: e["event_id"] == got[-1]["event_id"], 30)
    assert got == whole, "the resumed subscription differs from the log"


async def test_idle_stream_heartbeats_on_time(live: Live) -> None:
    """An idle SSE stream sends `: heartbeat` every keepalive interval (0.5 s here)."""
    tid = str(uuid.uuid4())
    beats: list[float] = []
    headers = {"Authorization": f"Bearer {live.token()}"}

    async def read() -> None:
        async with (
            httpx.AsyncClient(timeout=30) as http,
            http.stream(
                "POST",
                f"{live.url}/threads/{tid}/stream/events",
                json={"channels": ["lifecycle"]},
                headers=headers,
            ) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith(": heartbeat"):
                    beats.append(time.monotonic())
                    if len(beats) == 6:
                        return

    await asyncio.wait_for(read(), 15)
    gaps = [b - a for a, b in zip(beats[1:], beats[2:], strict=False)]  # the 1st is at once
    assert len(gaps) == 4
    # on time on a loaded machine: never early, never more than a poll late
    assert all(KEEPALIVE * 0.8 <= g <= KEEPALIVE + 1.0 for g in gaps), gaps


def _subscribers(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^graphkeep_stream_subscribers(?:\{[^}]*\})? (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def _sockets(pid: int, port: int) -> int:
    """Open client connections to the server's HTTP port held by the server process: the
    database pool's sockets (which legitimately stay open) are not counted."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed while listing
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            listening = fields[3] == "0A"
            count += local_port == port and not listening and fields[9] in inodes
    return count


async def _settled(probe: Any, want: Any, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    value = probe()
    while value != want and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        value = probe()
    return value


async def test_disconnect_frees_subscriptions_and_sockets(live: Live) -> None:
    """20 SSE and 5 WebSocket subscribers come and go: the subscriber gauge and the
    server's socket count return to where they were (no leaked follower or socket)."""
    pid = live.proc.popen.pid
    port = int(live.url.rsplit(":", 1)[1].rstrip("/"))
    base_subs = _subscribers(live.url)
    base_sockets = _sockets(pid, port)
    tid = str(uuid.uuid4())
    async with AsyncClient(live.url, token=live.token()) as client:
        streams = []
        for n in range(25):
            transport = "websocket" if n % 5 == 0 else "sse"
            thread = client.threads.stream(tid, assistant_id="echo", transport=transport)  # type: ignore[arg-type]
            streams.append(thread)
        readers = [asyncio.create_task(_first(t)) for t in streams]
        await asyncio.sleep(0.5)
        await streams[0].run.start(input={"text": "hi"})
        firsts = await asyncio.wait_for(asyncio.gather(*readers), 30)
        assert all(f["params"]["data"]["event"] == "running" for f in firsts)
        assert await _settled(lambda: _subscribers(live.url), base_subs + 25) == base_subs + 25
        # the 25 streams' own sockets; not base + 25: the baseline may include a /metrics
        # probe's keep-alive socket that the server has closed by now
        assert _sockets(pid, port) >= 25
        for thread in streams:
            await thread.aclose()
    assert await _settled(lambda: _subscribers(live.url), base_subs) == base_subs
    # keep-alive sockets of the /metrics probes may linger a moment; the 25 are gone
    assert await _settled(lambda: _sockets(pid, port) <= base_sockets + 2, True)


async def _first(thread: Any) -> dict[str, Any]:
    """The first lifecycle event of a subscription (kept open until the stream is closed)."""
    events = thread.subscribe(["lifecycle"])
    async for event in events:
        return dict(event)
    raise AssertionError("stream ended")


@pytest.mark.postgres
async def test_sigterm_cut_stream_resumes_on_another_server(live: Live) -> None:
    """A run streams through server A; A gets SIGTERM mid-run; the client reopens on server
    B with `since` = its cursor and gets the rest: every event exactly once, none missing."""
    if live.dialect != "postgres":
        pytest.skip("two server processes share one database on PostgreSQL")
    token = live.token()
    headers = {"Authorization": f"Bearer {token}"}
    tid = str(uuid.uuid4())
    with (
        serve(live.db_url, live.tmp, workers=2, env=ENV, name="a") as a,
        serve(live.db_url, live.tmp, workers=2, env=ENV, name="b") as b,
    ):
        assert a.url is not None and b.url is not None
        cut: list[dict[str, Any]] = []
        async with httpx.AsyncClient(timeout=30) as http:
            start = {
                "id": 1,
                "method": "run.start",
                "params": {"assistant_id": "steps", "input": {"trail": [], "sleep": 3}},
            }
            r = await http.post(f"{a.url}/threads/{tid}/commands", json=start, headers=headers)
            assert r.json()["type"] == "success", r.text
            try:
                async with http.stream(
                    "POST",
                    f"{a.url}/threads/{tid}/stream/events",
                    json={"channels": ALL},
                    headers=headers,
                ) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            cut.append(json.loads(line[6:]))
                            if len(cut) == 2:
                                a.popen.send_signal(15)  # SIGTERM mid-run
            except httpx.TransportError:
                pass  # an aborted stream is as good as a closed one: resume elsewhere
        a.popen.wait(60)  # A is gone (its drain let the run reach a boundary first)
        assert cut and not any(_is_root_completed(e) for e in cut), (
            "the run ended before the cut: nothing to resume"
        )
        cursor = cut[-1]["seq"]
        async with AsyncClient(b.url, token=token) as client:
            thread = client.threads.stream(tid, assistant_id="steps")
            rest = await _read_until(thread.subscribe(ALL, since=cursor), _is_root_completed, 60)
            full = thread.subscribe(ALL, since=0)
            whole = await _read_until(full, lambda e: e["event_id"] == rest[-1]["event_id"], 30)
    got = cut + rest
    ids = [e["event_id"] for e in got]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    assert [e["seq"] for e in got] == sorted(e["seq"] for e in got)
    assert got == whole, "the cut + resumed streams differ from the log"
    assert rest, "nothing was resumed on B"
    roots = [
        e["params"]["data"]["event"]
        for e in got
        if e["method"] == "lifecycle" and not e["params"]["namespace"]
    ]
    assert roots == ["running", "completed"], roots  # one running per run, across servers

"""`GET /threads/{thread_id}/stream` through the official SDK's `threads.join_stream`, against a
live `graphkeep serve` (JWT auth, so tenants are real) on SQLite and PostgreSQL.

Contract section 6.6: every event of every run on the thread (current and later ones), a
`metadata {"status": "run_done"}` when a run ends, `state_update` after update_state, an id on
every event, `Last-Event-ID` resumption, the three thread stream modes, 404 for a thread of
another tenant.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import StreamPart

from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import serve, worker

pytestmark = pytest.mark.e2e

AUTH_ENV = {
    "GRAPHKEEP_AUTH": "jwt",
    "GRAPHKEEP_JWT_SECRET": HS_SECRET,
    "GRAPHKEEP_JWT_ISSUER": ISSUER,
    "GRAPHKEEP_JWT_AUDIENCE": AUDIENCE,
    "GRAPHKEEP_STREAM_KEEPALIVE_SECONDS": "1",
}


@dataclass
class Live:
    url: str
    db_url: str
    dialect: str
    stack: ExitStack
    tmp: Any

    def client(self, tenant: str = "ts-a") -> LangGraphClient:
        token = hs_token(claims(tenant=tenant, sub=f"{tenant}-user", ttl=3600))
        return get_client(url=self.url, api_key=None, headers=bearer(token))


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"thread_stream_{dialect}")
    db_url = fresh_database(dialect, tmp)
    try:
        with ExitStack() as stack:
            proc = stack.enter_context(serve(db_url, tmp, workers=2, env=AUTH_ENV))
            assert proc.url is not None
            yield Live(proc.url, db_url, dialect, stack, tmp)
    finally:
        if dialect == "postgres":
            drop_pg_database(db_url)


class Reader:
    """Consumes a thread stream in the background; `until` waits for a condition."""

    def __init__(self, stream: AsyncIterator[StreamPart]) -> None:
        self.parts: list[StreamPart] = []
        self.times: list[float] = []  # when each part arrived (monotonic)
        self._stream = stream
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run())
        self._task.add_done_callback(lambda _t: self._changed.set())  # surfaces its error

    async def _run(self) -> None:
        async for part in self._stream:
            self.parts.append(part)
            self.times.append(time.monotonic())
            self._changed.set()

    async def until(self, predicate: Callable[[list[StreamPart]], bool], timeout: float = 30):
        async def wait() -> None:
            while not predicate(self.parts):
                if self._task.done():
                    self._task.result()
                    raise AssertionError(f"stream ended early: {self.parts}")
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"condition not reached; got {self.parts}") from None
        return self.parts

    async def close(self) -> None:
        self._task.cancel()
        with __import__("contextlib").suppress(asyncio.CancelledError, Exception):
            await self._task


def run_done(parts: list[StreamPart]) -> list[str]:
    return [
        p.data["run_id"]
        for p in parts
        if p.event == "metadata" and isinstance(p.data, dict) and p.data.get("status") == "run_done"
    ]


def id_key(event_id: str | None) -> tuple[int, int]:
    assert event_id is not None
    key, _, seq = event_id.partition("-")
    return int(key), int(seq)


async def _subscribers(url: str) -> float:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        text = (await http.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith("graphkeep_stream_subscribers"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def own_client(client: LangGraphClient) -> LangGraphClient:
    """A client of its own for a stream (same server and headers): a stream cut short by the
    test must not leave its connection in the pool the test's other calls use."""
    http = client.http.client
    return get_client(url=str(http.base_url), api_key=None, headers=dict(http.headers))


async def joined(client: LangGraphClient, thread_id: str, **kwargs: Any) -> Reader:
    """A reader of the thread stream, once the server has joined it (the join is live from
    that moment: runs created earlier are followed from their current event)."""
    url = str(client.http.client.base_url)
    before = await _subscribers(url)
    reader = Reader(await own_client(client).threads.join_stream(thread_id, **kwargs))
    deadline = asyncio.get_running_loop().time() + 5
    while await _subscribers(url) <= before and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return reader


async def test_thread_stream_follows_every_run_and_marks_their_end(live: Live) -> None:
    client = live.client()
    tid = (await client.threads.create())["thread_id"]
    reader = await joined(client, tid)
    try:
        first = await client.runs.create(
            tid, "steps", input={"tag": uuid.uuid4().hex[:6]}, stream_mode=["updates"]
        )
        second = await client.runs.create(tid, "echo", input={"text": "hi"})  # enqueued
        parts = await reader.until(lambda ps: len(run_done(ps)) == 2)
    finally:
        await reader.close()
    assert run_done(parts) == [first["run_id"], second["run_id"]]
    names = [p.event for p in parts]
    cut = names.index("metadata", 1)  # the first run's run_done
    assert names[:cut] == ["metadata", "updates", "updates", "updates"]
    assert parts[0].data == {"run_id": first["run_id"], "attempt": 1}
    assert [list(p.data) for p in parts[1:cut]] == [["a"], ["b"], ["c"]]
    # the second run: its own metadata, its values, then its end
    assert names[cut + 1 :] == ["metadata", "values", "values", "metadata"]
    assert parts[cut + 1].data["run_id"] == second["run_id"]
    assert parts[-2].data == {"text": "hi"}
    # every event has an id, strictly increasing
    keys = [id_key(p.id) for p in parts]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


async def test_state_update_events_and_modes(live: Live) -> None:
    client = live.client()
    tid = (await client.threads.create(graph_id="echo"))["thread_id"]
    updates = await joined(client, tid, stream_mode="state_update")
    lifecycle = await joined(client, tid, stream_mode=["lifecycle"])
    both = await joined(client, tid, stream_mode=["run_modes", "state_update"])
    try:
        await client.threads.update_state(tid, {"text": "set by hand"})
        got = await updates.until(lambda ps: len(ps) == 1)
        run = await client.runs.wait(tid, "echo", input={"text": "x"})
        assert run
        life = await lifecycle.until(lambda ps: len(run_done(ps)) == 1)
        mixed = await both.until(lambda ps: len(run_done(ps)) == 1)
        await asyncio.sleep(0.3)  # nothing else arrives on the state_update stream
    finally:
        for r in (updates, lifecycle, both):
            await r.close()
    assert [p.event for p in got] == ["state_update"]
    assert updates.parts == got
    assert got[0].data["thread_id"] == tid
    assert got[0].data["state"]["values"]["text"] == "set by hand"
    assert got[0].data["state"]["checkpoint"]["thread_id"] == tid
    assert got[0].id
    # lifecycle: the run's start and end only
    assert [p.event for p in life] == ["metadata", "metadata"]
    assert life[0].data["attempt"] == 1 and life[1].data["status"] == "run_done"
    # run_modes + state_update: the update, then the run
    assert [p.event for p in mixed][:3] == ["state_update", "metadata", "values"]


async def test_last_event_id_resumes_after_an_event(live: Live) -> None:
    client = live.client()
    tid = (await client.threads.create())["thread_id"]
    one = await client.runs.wait(tid, "echo", input={"text": "one"})
    await client.threads.update_state(tid, {"text": "between"})
    two = await client.runs.wait(tid, "echo", input={"text": "two"})
    assert one and two
    modes: Any = ["run_modes", "state_update"]
    streams = own_client(client).threads
    everything = Reader(await streams.join_stream(tid, last_event_id="-", stream_mode=modes))
    try:
        parts = await everything.until(lambda ps: len(run_done(ps)) == 2)
    finally:
        await everything.close()
    names = [p.event for p in parts]
    assert names == [
        "metadata", "values", "values", "metadata",  # run one
        "state_update",
        "metadata", "values", "values", "metadata",  # run two
    ]  # fmt: skip
    assert parts[4].data["state"]["values"]["text"] == "between"
    # resume after run one's second event: the rest of run one, the update, run two
    streams = own_client(client).threads
    tail = Reader(await streams.join_stream(tid, last_event_id=parts[1].id, stream_mode=modes))
    try:
        rest = await tail.until(lambda ps: len(run_done(ps)) == 2)
    finally:
        await tail.close()
    assert [p.id for p in rest] == [p.id for p in parts[2:]]
    # resume after the state update: run two only
    streams = own_client(client).threads
    after_update = Reader(
        await streams.join_stream(tid, last_event_id=parts[4].id, stream_mode=modes)
    )
    try:
        last = await after_update.until(lambda ps: len(run_done(ps)) == 1)
    finally:
        await after_update.close()
    assert [p.id for p in last] == [p.id for p in parts[5:]]


async def test_errors_and_tenant_isolation(live: Live) -> None:
    owner = live.client("ts-owner")
    tid = (await owner.threads.create())["thread_id"]
    intruder = live.client("ts-intruder")
    with pytest.raises(NotFoundError):
        await anext(aiter(await intruder.threads.join_stream(tid)))
    with pytest.raises(NotFoundError):
        await anext(aiter(await owner.threads.join_stream(str(uuid.uuid4()))))
    with pytest.raises(UnprocessableEntityError):
        await anext(aiter(await owner.threads.join_stream(tid, last_event_id="abc")))
    with pytest.raises(UnprocessableEntityError):
        await anext(aiter(await owner.threads.join_stream(tid, stream_mode="values")))  # type: ignore[arg-type]
    token = hs_token(claims(tenant="ts-owner", sub="x", ttl=600))
    async with httpx.AsyncClient(base_url=live.url, headers=bearer(token), timeout=10) as http:
        r = await http.get("/threads/not-a-uuid/stream")
        assert r.status_code == 422
        # the official parameter name and a comma-separated list are accepted too
        async with http.stream(
            "GET", f"/threads/{tid}/stream", params={"stream_modes": "lifecycle,state_update"}
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["location"].startswith(f"/threads/{tid}/stream")


async def test_thread_deleted_ends_the_stream(live: Live) -> None:
    client = live.client()
    tid = (await client.threads.create())["thread_id"]
    reader = await joined(client, tid)
    await client.threads.delete(tid)
    await asyncio.wait_for(reader._task, 10)  # the stream closes (keep-alive tick)
    assert reader.parts == []


@pytest.mark.postgres
async def test_thread_stream_on_api_process_for_runs_in_a_worker_process(live: Live) -> None:
    if live.dialect != "postgres":
        pytest.skip("cross-process needs PostgreSQL")
    # keep-alives far apart: the stream cannot find runs by polling at each keep-alive
    env = {**AUTH_ENV, "GRAPHKEEP_STREAM_KEEPALIVE_SECONDS": "10"}
    api = live.stack.enter_context(serve(live.db_url, live.tmp, workers=0, env=env, name="api"))
    live.stack.enter_context(worker(live.db_url, live.tmp, env=env))
    assert api.url is not None
    token = hs_token(claims(tenant="ts-a", sub="ts-a-user", ttl=3600))
    client = get_client(url=api.url, api_key=None, headers=bearer(token))
    tid = (await client.threads.create())["thread_id"]
    reader = await joined(client, tid)
    try:
        created = [
            await client.runs.create(tid, "writer", input={"count": 30}, stream_mode=["custom"])
            for _ in range(2)
        ]
        parts = await reader.until(lambda ps: len(run_done(ps)) == 2)
    finally:
        await reader.close()
    assert run_done(parts) == [r["run_id"] for r in created]
    customs = [p.data["i"] for p in parts if p.event == "custom"]
    assert customs == list(range(30)) * 2
    # live, not at the end: a run that starts in the worker while the stream waits
    reader = await joined(client, tid)
    try:
        await asyncio.sleep(0.5)  # idle: the stream has announced itself to the worker
        slow = await client.runs.create(
            tid, "steps", input={"tag": uuid.uuid4().hex[:6], "sleep": 2}, stream_mode=["updates"]
        )
        parts = await reader.until(lambda ps: len(run_done(ps)) == 1)
    finally:
        await reader.close()
    assert run_done(parts) == [slow["run_id"]]
    first_update = next(i for i, p in enumerate(parts) if p.event == "updates")
    assert list(parts[first_update].data) == ["a"]
    # "a" arrived before "b" slept its 2 s, not with the run's end
    assert reader.times[-1] - reader.times[first_update] > 1.5


async def test_delayed_run_does_not_hide_a_later_one(live: Live) -> None:
    client = live.client()
    tid = (await client.threads.create())["thread_id"]
    reader = await joined(client, tid)
    try:
        delayed = await client.runs.create(tid, "echo", input={"text": "late"}, after_seconds=2)
        now = await client.runs.create(tid, "echo", input={"text": "now"})
        parts = await reader.until(lambda ps: len(run_done(ps)) == 2)
    finally:
        await reader.close()
    assert set(run_done(parts)) == {delayed["run_id"], now["run_id"]}
    values = [p.data["text"] for p in parts if p.event == "values"]
    assert sorted(values) == ["late", "late", "now", "now"]

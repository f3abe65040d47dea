"""The run engine in-process (create_app + ASGI transport) on both dialects: keep-alives,
run time limit, bounded attempts, event retention."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import run_events, runs
from app.db.types import utcnow
from app.runs import queue


async def _thread(client: httpx.AsyncClient) -> str:
    return str((await client.post("/threads", json={})).json()["thread_id"])


async def test_wait_and_sse_send_keepalives(make_client: Any) -> None:
    client = await make_client(stream_keepalive_seconds=0.2)
    tid = await _thread(client)
    body = {"assistant_id": "steps", "input": {"tag": "k", "sleep": 0.9}}
    r = await client.post(f"/threads/{tid}/runs/wait", json=body)
    assert r.status_code == 200
    assert r.text.startswith("\n")  # keep-alive newlines before the JSON
    assert r.json()["trail"] == ["a", "b", "c"]
    r = await client.post(f"/threads/{tid}/runs/stream", json=body)
    assert ": heartbeat\r\n\r\n" in r.text
    assert r.text.startswith("event: metadata\r\n")


async def test_run_time_limit_gives_timeout(make_client: Any) -> None:
    client = await make_client(run_timeout_seconds=0.5)
    tid = await _thread(client)
    r = await client.post(
        f"/threads/{tid}/runs/stream",
        json={"assistant_id": "steps", "input": {"tag": "t", "sleep": 3}},
    )
    assert "event: error\r\n" in r.text
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    run = (await client.get(f"/threads/{tid}/runs/{run_id}")).json()
    assert run["status"] == "timeout"
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "error"


async def test_attempts_are_bounded(make_client: Any, engine: AsyncEngine) -> None:
    client = await make_client(max_attempts=2)
    tid = await _thread(client)
    run = (
        await client.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "steps", "input": {"tag": "m"}, "after_seconds": 3600},
        )
    ).json()
    # As if two workers had died with it: the next claim is its third attempt.
    async with engine.begin() as conn:
        await conn.execute(
            runs.update()
            .where(runs.c.run_id == run["run_id"])
            .values(attempt=2, available_at=utcnow() - timedelta(seconds=1))
        )
    out = (await client.get(f"/threads/{tid}/runs/{run['run_id']}/join")).json()
    assert out["__error__"]["error"] == "RunAttemptsExceeded"
    assert (await client.get(f"/threads/{tid}/runs/{run['run_id']}")).json()["status"] == "error"


async def test_stream_events_expire_after_retention(make_client: Any, engine: AsyncEngine) -> None:
    client = await make_client(stream_event_retention_seconds=0, sweep_interval_seconds=0.1)
    tid = await _thread(client)
    r = await client.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "echo", "input": {}})
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    for _ in range(100):
        async with engine.connect() as conn:
            left = (
                await conn.execute(select(func.count()).where(run_events.c.run_id == run_id))
            ).scalar()
        if left == 0:
            break
        await asyncio.sleep(0.1)
    assert left == 0


async def _occupy_the_worker(client: httpx.AsyncClient, seconds: float) -> None:
    """Start a run of `seconds` and return once the app's one worker holds it."""
    busy = {"assistant_id": "steps", "input": {"tag": "busy", "sleep": seconds}}
    thread_id = await _thread(client)
    run = (await client.post(f"/threads/{thread_id}/runs", json=busy)).json()
    for _ in range(100):
        got = await client.get(f"/threads/{thread_id}/runs/{run['run_id']}")
        if got.json()["status"] == "running":
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the busy run never started")


async def test_a_claim_under_way_keeps_its_slot_from_a_run_created_meanwhile(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker slot, and the dispatcher's claim is in flight (held here at its start): a
    run created meanwhile must not take the slot by direct dispatch, or the claim would then
    start a second run next to it. (Before: the dispatcher checked for a free slot, awaited
    its claim, and started what it claimed; under load the queued run of
    test_a_wait_queued_longer_than_a_heartbeat_sends_keepalives ran beside the busy one.)"""
    client = await make_client(workers=1)
    entered, release = asyncio.Event(), asyncio.Event()
    real_claim = queue.claim
    held = False

    async def held_claim(*args: Any, **kwargs: Any) -> Any:
        nonlocal held
        if not held:
            held = True
            entered.set()
            await release.wait()
        return await real_claim(*args, **kwargs)

    monkeypatch.setattr(queue, "claim", held_claim)
    try:
        await asyncio.wait_for(entered.wait(), timeout=5)  # the next poll's claim is under way
        busy_thread, quick_thread = await _thread(client), await _thread(client)
        busy = {"assistant_id": "steps", "input": {"tag": "busy", "sleep": 1.5}}
        first = (await client.post(f"/threads/{busy_thread}/runs", json=busy)).json()
        quick = {"assistant_id": "steps", "input": {"tag": "quick"}}
        second = (await client.post(f"/threads/{quick_thread}/runs", json=quick)).json()
        assert first["status"] == second["status"] == "pending"  # the slot is the claim's
    finally:
        release.set()  # a failed check must not leave the dispatcher held at teardown

    async def status(thread_id: str, run: dict[str, Any]) -> str:
        got = await client.get(f"/threads/{thread_id}/runs/{run['run_id']}")
        return str(got.json()["status"])

    for _ in range(300):
        if await status(busy_thread, first) == "running":
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the claim never started the first run")
    for _ in range(5):  # while the first runs (1.5 s), the second waits for the one slot
        assert await status(quick_thread, second) == "pending"
        await asyncio.sleep(0.1)
    await client.get(f"/threads/{quick_thread}/runs/{second['run_id']}/join")
    assert await status(busy_thread, first) == "success"


async def test_a_failed_claim_gives_its_slot_back(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that raises (a database error mid-claim) returns the slot it reserved: the one
    slot still runs the next run."""
    client = await make_client(workers=1)
    real_claim = queue.claim
    failed = asyncio.Event()

    async def failing_claim(*args: Any, **kwargs: Any) -> Any:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("claim failed")
        return await real_claim(*args, **kwargs)

    monkeypatch.setattr(queue, "claim", failing_claim)
    await asyncio.wait_for(failed.wait(), timeout=5)
    tid = await _thread(client)
    body = {"assistant_id": "steps", "input": {"tag": "after"}}
    # a leaked slot would leave the run pending for ever
    r = await asyncio.wait_for(client.post(f"/threads/{tid}/runs/wait", json=body), timeout=10)
    assert r.status_code == 200 and r.json()["trail"] == ["a", "b", "c"]


async def test_a_wait_queued_behind_busy_workers_reads_nothing_until_its_run_starts(
    make_client: Any, engine: AsyncEngine
) -> None:
    """runs/wait on a run that waits in the queue (one worker, busy) looks at the database
    only once the run starts here: a waiter that does not stream needs no early look (before,
    it read the run's events and status a quarter of a second in, once per queued run)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("one process on PostgreSQL knows it is alone (SQLite has no listener)")
    client = await make_client(workers=1)
    reads: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if "FROM run_events" in statement or statement.lstrip().startswith("SELECT runs.status"):
            reads.append(statement)

    await _occupy_the_worker(client, 1.0)
    queued_thread = await _thread(client)
    # every engine's statements (only the app runs any while the wait is under way)
    event.listen(Engine, "before_cursor_execute", record)
    try:
        started = time.monotonic()
        body = {"assistant_id": "steps", "input": {"tag": "q"}}
        r = await client.post(f"/threads/{queued_thread}/runs/wait", json=body)
        waited = time.monotonic() - started
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert r.status_code == 200 and r.json()["trail"] == ["a", "b", "c"]
    assert waited > 0.5, "the run did not wait in the queue: the test proves nothing"
    assert waited < 4.0  # woken when its run started, not at the next keep-alive
    assert reads == []


async def test_a_wait_queued_longer_than_a_heartbeat_sends_keepalives(make_client: Any) -> None:
    """While its run waits in the queue, runs/wait still sends a keep-alive every heartbeat
    (the first one comes from the wait for the run's wake-up), then the run's output."""
    client = await make_client(workers=1, stream_keepalive_seconds=0.2)
    await _occupy_the_worker(client, 1.0)
    queued_thread = await _thread(client)
    body = {"assistant_id": "steps", "input": {"tag": "q"}}
    r = await client.post(f"/threads/{queued_thread}/runs/wait", json=body)
    assert r.status_code == 200
    assert r.text.startswith("\n\n")  # at least two heartbeats passed while it queued
    assert r.json()["trail"] == ["a", "b", "c"]

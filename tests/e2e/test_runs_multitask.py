"""Multitask strategies and cancellation through the official SDK (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live

pytestmark = pytest.mark.e2e
live = runs_fixtures.live  # one live server per dialect for this module

SLOW = 1.5  # seconds node "b" sleeps


def tag() -> str:
    return uuid.uuid4().hex[:10]


async def wait_status(client: Any, thread_id: str, run_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        run = await client.runs.get(thread_id, run_id)
        if run["status"] in statuses:
            return run  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.05)


async def start_slow(client: Any, thread_id: str, t: str, **kwargs: Any) -> dict[str, Any]:
    run = await client.runs.create(thread_id, "steps", input={"tag": t, "sleep": SLOW}, **kwargs)
    await wait_status(client, thread_id, run["run_id"], "running")
    return run  # type: ignore[no-any-return]


async def a_done(live: Live, t: str) -> None:
    """Node "a" of the slow run finished (and its checkpoint is written); "b" is sleeping."""
    deadline = time.monotonic() + 15
    while live.records(t) != ["a"]:
        assert time.monotonic() < deadline, live.records(t)
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)


async def run_ids_in_history(client: Any, thread_id: str) -> set[str]:
    history = await client.threads.get_history(thread_id, limit=100)
    return {h["metadata"].get("run_id") for h in history}


async def test_reject_gives_409_and_creates_nothing(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    first = await start_slow(client, tid, tag())
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "echo", input={}, multitask_strategy="reject")
    assert [r["run_id"] for r in await client.runs.list(tid)] == [first["run_id"]]
    await client.runs.join(tid, first["run_id"])


async def test_enqueue_runs_in_order_one_at_a_time(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    t1, t2 = tag(), tag()
    first = await client.runs.create(tid, "steps", input={"tag": t1, "sleep": 0.5})
    second = await client.runs.create(tid, "steps", input={"tag": t2}, multitask_strategy="enqueue")
    await wait_status(client, tid, first["run_id"], "running")
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    out = await client.runs.join(tid, second["run_id"])
    assert out["trail"] == ["a", "b", "c", "a", "b", "c"]
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "success"
    lines = [line.split("@")[0] for line in live.record.read_text().splitlines()]
    assert lines.index(f"{t1}:c") < lines.index(f"{t2}:a")  # never interleaved


async def test_interrupt_strategy_keeps_progress(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    t = tag()
    first = await start_slow(client, tid, t)
    await a_done(live, t)
    second = await client.runs.create(
        tid, "echo", input={"text": "new"}, multitask_strategy="interrupt"
    )
    await client.runs.join(tid, second["run_id"])
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "interrupted"
    assert first["run_id"] in await run_ids_in_history(client, tid)
    assert live.records(t) == ["a"]  # b never finished, c never started


async def test_rollback_strategy_deletes_run_and_checkpoints(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "steps", input={"tag": tag()})
    before = await client.threads.get_state(tid)
    t = tag()
    first = await start_slow(client, tid, t)
    await a_done(live, t)
    second = await client.runs.create(tid, "steps", input=None, multitask_strategy="rollback")
    await client.runs.join(tid, second["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, first["run_id"])
    assert first["run_id"] not in await run_ids_in_history(client, tid)
    after = await client.threads.get_state(tid)
    assert after["values"]["trail"] == before["values"]["trail"]


async def test_cancel_interrupt_with_wait(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    t = tag()
    run = await start_slow(client, tid, t)
    await a_done(live, t)
    out = await client.runs.cancel(tid, run["run_id"], wait=True)
    assert out["trail"] == ["a"]
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    assert run["run_id"] in await run_ids_in_history(client, tid)
    thread = await client.threads.get(tid)
    assert thread["status"] in ("idle", "interrupted")
    # Cancelling again: no longer pending or running.
    with pytest.raises(NotFoundError):
        await client.runs.cancel(tid, run["run_id"])


async def test_cancel_rollback_without_wait(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    t = tag()
    run = await start_slow(client, tid, t)
    await a_done(live, t)
    async with httpx.AsyncClient(base_url=live.url) as http:
        r = await http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel?action=rollback&wait=0")
        assert r.status_code == 202 and r.content == b""
    for _ in range(200):
        try:
            await client.runs.get(tid, run["run_id"])
        except NotFoundError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("rolled-back run still exists")
    assert await run_ids_in_history(client, tid) == set()
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_cancel_pending_run_closes_its_stream(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    first = await start_slow(client, tid, tag())
    queued = await client.runs.create(tid, "echo", input={"text": "q"})

    async def read() -> list[Any]:
        return [p async for p in client.runs.join_stream(tid, queued["run_id"])]

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.2)
    await client.runs.cancel(tid, queued["run_id"])
    parts = await asyncio.wait_for(reader, timeout=10)
    assert parts == []
    assert (await client.runs.get(tid, queued["run_id"]))["status"] == "interrupted"
    await client.runs.join(tid, first["run_id"])
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_cancel_many_by_ids_and_status(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    first = await start_slow(client, tid, tag())
    queued = [
        (await client.runs.create(tid, "echo", input={"text": str(i)}))["run_id"] for i in range(2)
    ]
    await client.runs.cancel_many(thread_id=tid, run_ids=[queued[0]])
    assert (await client.runs.get(tid, queued[0]))["status"] == "interrupted"
    await client.runs.cancel_many(status="pending")
    assert (await client.runs.get(tid, queued[1]))["status"] == "interrupted"
    await client.runs.cancel_many(status="running", action="interrupt")
    await wait_status(client, tid, first["run_id"], "interrupted")
    with pytest.raises(NotFoundError):
        await client.runs.cancel_many(thread_id=tid, run_ids=[queued[0]])


async def test_on_disconnect_cancel_and_continue(live: Live) -> None:
    client = get_client(url=live.url)
    tid = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "steps", "input": {"tag": tag(), "sleep": SLOW}}
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        for mode, expected in (("cancel", "interrupted"), ("continue", "success")):
            async with http.stream(
                "POST", f"/threads/{tid}/runs/stream", json={**body, "on_disconnect": mode}
            ) as s:
                run_id = s.headers["content-location"].rsplit("/", 1)[1]
                async for line in s.aiter_lines():
                    if line.startswith("event: values"):
                        break  # leave mid-run
            run = await wait_status(client, tid, run_id, "interrupted", "success", "error")
            assert run["status"] == expected

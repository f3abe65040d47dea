"""When a run's events go to `run_events` before its end: at once for a resumable stream or
when a reader in another process announces itself (`w` NOTIFY); otherwise all of them with the
run's final transaction (one write per run). Real PostgreSQL, two hubs on two engines standing
for two processes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import run_events
from app.runs.events import EventHub
from tests.integration.test_runs_queue import TENANT, add_run, add_thread, set_status

pytestmark = pytest.mark.postgres


async def _stored(engine: AsyncEngine, run_id: str) -> int:
    async with engine.connect() as conn:
        stmt = select(func.count()).where(run_events.c.run_id == run_id)
        return int((await conn.execute(stmt)).scalar_one())


@pytest.fixture
async def hubs(pg_url: str) -> Any:
    from app.db.engine import create_engine
    from tests.conftest import truncate_all

    writer_engine, reader_engine = create_engine(pg_url), create_engine(pg_url)
    writer = EventHub(writer_engine, retention_seconds=60)
    reader = EventHub(reader_engine, retention_seconds=60)
    await writer.start()
    await reader.start()
    try:
        yield writer, reader
    finally:
        await writer.stop()
        await reader.stop()
        await truncate_all(writer_engine)
        await writer_engine.dispose()
        await reader_engine.dispose()


async def test_unwatched_events_wait_for_the_end_then_a_reader_elsewhere_gets_them_live(
    hubs: tuple[EventHub, EventHub],
) -> None:
    writer, reader = hubs
    tid = await add_thread(writer.engine)
    rid = await add_run(writer.engine, tid)
    await set_status(writer.engine, rid, "running")
    pub = writer.publisher(run_id=rid, thread_id=tid, tenant_id=TENANT, last_seq=0, eager=False)
    pub.emit("values", "0")
    pub.emit("values", "1")
    await asyncio.sleep(0.2)  # several coalescing periods: nobody asked, nothing written
    assert await _stored(writer.engine, rid) == 0 and not pub.wrote_any
    got: list[Any] = []

    async def follow() -> None:
        async for ev in reader.read(rid, tenant_id=TENANT, after_seq=0, heartbeat=30):
            got.append(ev)
            if len(got) == 3:
                return

    started = asyncio.get_running_loop().time()
    following = asyncio.create_task(follow())
    # the reader announces itself: what is pending is stored at once, later events as they come
    for _ in range(100):
        if len(got) == 2:
            break
        await asyncio.sleep(0.05)
    assert [ev.data for ev in got] == ["0", "1"]
    pub.emit("values", "2")
    await asyncio.wait_for(following, timeout=5)
    assert asyncio.get_running_loop().time() - started < 3  # by NOTIFY, not the heartbeat
    assert [ev.data for ev in got] == ["0", "1", "2"]
    assert pub.wrote_any
    pub.close(ended=False)


async def test_an_announced_run_starts_eager_and_a_resumable_one_always_is(
    hubs: tuple[EventHub, EventHub],
) -> None:
    writer, reader = hubs
    tid = await add_thread(writer.engine)
    announced, resumable = await add_run(writer.engine, tid), await add_run(writer.engine, tid)
    await reader.announce_reader(announced)  # before the run starts in the writer's process
    for _ in range(100):
        if announced in writer.watches.runs:
            break
        await asyncio.sleep(0.02)
    for rid, eager in ((announced, False), (resumable, True)):
        pub = writer.publisher(run_id=rid, thread_id=tid, tenant_id=TENANT, last_seq=0, eager=eager)
        pub.emit("values", "x")
        for _ in range(100):
            if await _stored(writer.engine, rid) == 1:
                break
            await asyncio.sleep(0.02)
        assert await _stored(writer.engine, rid) == 1, rid
        rows = await pub.final_rows()  # the end marker only: the event is stored already
        assert [r["event"] for r in rows] == ["__end__"]
        pub.close(ended=False)

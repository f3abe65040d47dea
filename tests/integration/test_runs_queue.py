"""The runs table as a queue, on real PostgreSQL and SQLite: claim, FIFO per thread, leases,
renewal, reaper; and the run_events log: batched writes, replay, live fan-out, end marker."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import run_events, runs, threads
from app.db.types import utcnow
from app.runs import queue
from app.runs.events import END_EVENT, EventHub

TENANT = "t-queue"


async def add_thread(engine: AsyncEngine) -> str:
    tid = str(uuid.uuid4())
    now = utcnow()
    async with engine.begin() as conn:
        await conn.execute(
            threads.insert().values(
                thread_id=tid,
                tenant_id=TENANT,
                status="busy",
                metadata={},
                config={},
                values=None,
                interrupts={},
                created_at=now,
                updated_at=now,
                state_updated_at=now,
            )
        )
    return tid


async def add_run(engine: AsyncEngine, thread_id: str, *, delay: float = 0, **extra: Any) -> str:
    rid = str(uuid.uuid4())
    now = utcnow()
    at = now + timedelta(seconds=delay)
    async with engine.begin() as conn:
        await conn.execute(
            runs.insert().values(
                run_id=rid,
                tenant_id=TENANT,
                thread_id=thread_id,
                assistant_id=str(uuid.uuid4()),
                graph_id="g",
                status="pending",
                metadata={},
                kwargs={"input": None},
                multitask_strategy="enqueue",
                created_at=at,
                updated_at=now,
                available_at=at,
                **extra,
            )
        )
        await asyncio.sleep(0.002)  # distinct created_at for FIFO checks
    return rid


async def set_status(engine: AsyncEngine, run_id: str, status: str, **extra: Any) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            runs.update().where(runs.c.run_id == run_id).values(status=status, **extra)
        )


async def test_concurrent_claims_take_each_run_once(engine: AsyncEngine) -> None:
    ids = {await add_run(engine, await add_thread(engine)) for _ in range(12)}
    claimed: list[str] = []

    async def claimer(n: int) -> None:
        while True:
            run = await queue.claim(engine, worker_id=f"w{n}", lease_seconds=30)
            if run is None:
                return
            claimed.append(run.run_id)

    await asyncio.gather(*(claimer(n) for n in range(6)))
    assert sorted(claimed) == sorted(ids)  # every run once, none twice
    async with engine.connect() as conn:
        rows = (await conn.execute(select(runs.c.status, runs.c.attempt, runs.c.worker_id))).all()
    assert {r.status for r in rows} == {"running"}
    assert {r.attempt for r in rows} == {1}
    assert all(r.worker_id for r in rows)


async def test_one_running_run_per_thread_in_creation_order(engine: AsyncEngine) -> None:
    tid = await add_thread(engine)
    first, second, third = [await add_run(engine, tid) for _ in range(3)]
    got = await queue.claim(engine, worker_id="w", lease_seconds=30)
    assert got is not None and got.run_id == first and got.attempt == 1
    assert await queue.claim(engine, worker_id="w", lease_seconds=30) is None  # thread busy
    await set_status(engine, first, "success")
    got = await queue.claim(engine, worker_id="w", lease_seconds=30)
    assert got is not None and got.run_id == second
    await set_status(engine, second, "error")
    got = await queue.claim(engine, worker_id="w", lease_seconds=30)
    assert got is not None and got.run_id == third


async def test_delayed_runs_wait_for_available_at(engine: AsyncEngine) -> None:
    tid = await add_thread(engine)
    await add_run(engine, tid, delay=60)
    assert await queue.claim(engine, worker_id="w", lease_seconds=30) is None
    other = await add_run(engine, await add_thread(engine))
    got = await queue.claim(engine, worker_id="w", lease_seconds=30)
    assert got is not None and got.run_id == other


async def test_expired_lease_is_reaped_and_claimed_again(engine: AsyncEngine) -> None:
    rid = await add_run(engine, await add_thread(engine))
    got = await queue.claim(engine, worker_id="dead", lease_seconds=30)
    assert got is not None
    assert await queue.reap_expired(engine) == []  # lease still valid
    await set_status(engine, rid, "running", lease_expires_at=utcnow() - timedelta(seconds=1))
    assert await queue.reap_expired(engine) == [rid]
    again = await queue.claim(engine, worker_id="alive", lease_seconds=30)
    assert again is not None and again.run_id == rid and again.attempt == 2
    # The dead worker's renewal no longer holds it.
    lost = await queue.renew(engine, run_id=rid, worker_id="dead", lease_seconds=30)
    assert lost.held is False


async def test_renew_extends_lease_and_reports_cancel(engine: AsyncEngine) -> None:
    rid = await add_run(engine, await add_thread(engine))
    await queue.claim(engine, worker_id="w", lease_seconds=1)
    state = await queue.renew(engine, run_id=rid, worker_id="w", lease_seconds=60)
    assert state.held and state.cancel_action is None
    async with engine.connect() as conn:
        lease = (
            await conn.execute(select(runs.c.lease_expires_at).where(runs.c.run_id == rid))
        ).scalar()
    assert lease is not None and lease > utcnow() + timedelta(seconds=50)
    await set_status(engine, rid, "running", cancel_action="rollback")
    state = await queue.renew(engine, run_id=rid, worker_id="w", lease_seconds=60)
    assert state.held and state.cancel_action == "rollback"


async def test_release_puts_a_drained_run_back(engine: AsyncEngine) -> None:
    rid = await add_run(engine, await add_thread(engine))
    await queue.claim(engine, worker_id="w", lease_seconds=30)
    async with engine.begin() as conn:
        assert await queue.release(conn, run_id=rid, worker_id="other") is False
        assert await queue.release(conn, run_id=rid, worker_id="w") is True
    got = await queue.claim(engine, worker_id="w2", lease_seconds=30)
    assert got is not None and got.run_id == rid and got.attempt == 2


# --------------------------------------------------------------------------- events


async def test_events_batched_replayed_and_ended(engine: AsyncEngine) -> None:
    hub = EventHub(engine, retention_seconds=60)
    tid = await add_thread(engine)
    rid = await add_run(engine, tid)
    pub = hub.publisher(run_id=rid, thread_id=tid, tenant_id=TENANT, last_seq=0)
    live: list[Any] = []

    async def follow() -> None:
        async for ev in hub.read(rid, tenant_id=TENANT, after_seq=0, heartbeat=5):
            live.append(ev)

    reader = asyncio.create_task(follow())
    for i in range(40):
        pub.emit("custom", f'{{"i":{i}}}')
    await pub.flush()  # stored in one batch
    assert pub.wrote_any
    for i in range(40, 50):
        pub.emit("custom", f'{{"i":{i}}}')
    rows = await pub.final_rows()  # the rest go with the final status, plus the end marker
    assert [r["seq"] for r in rows] == list(range(41, 52))
    async with engine.begin() as conn:
        await conn.execute(run_events.insert(), rows)
        await hub.set_expiry(conn, run_id=rid, tenant_id=TENANT)
    pub.close(ended=True)
    await asyncio.wait_for(reader, timeout=10)
    assert [ev.seq for ev in live] == list(range(1, 51))
    assert [ev.data for ev in live][:2] == ['{"i":0}', '{"i":1}']
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                select(run_events.c.seq, run_events.c.event, run_events.c.expires_at)
                .where(run_events.c.run_id == rid)
                .order_by(run_events.c.seq)
            )
        ).all()
    assert [r.seq for r in rows] == list(range(1, 52))
    assert rows[-1].event == END_EVENT
    assert all(r.expires_at is not None for r in rows)
    # Replay from the database (a reader in another process, or later): after a given seq.
    replay = [ev async for ev in hub.read(rid, tenant_id=TENANT, after_seq=47) if ev]
    assert [ev.seq for ev in replay] == [48, 49, 50]
    # Another tenant sees nothing.
    other = [ev async for ev in hub.read(rid, tenant_id="intruder", after_seq=0) if ev]
    assert other == []


async def test_reader_of_a_deleted_run_ends(engine: AsyncEngine) -> None:
    hub = EventHub(engine, retention_seconds=60)
    tid = await add_thread(engine)
    rid = await add_run(engine, tid)
    reader = asyncio.create_task(
        asyncio.wait_for(
            _collect(hub.read(rid, tenant_id=TENANT, after_seq=0, heartbeat=0.2)), timeout=10
        )
    )
    await asyncio.sleep(0.1)
    async with engine.begin() as conn:
        await conn.execute(runs.delete().where(runs.c.run_id == rid))
    items = await reader
    assert [i for i in items if i is not None] == []


async def _collect(it: Any) -> list[Any]:
    return [x async for x in it]


@pytest.mark.postgres
async def test_events_reach_a_reader_in_another_hub_via_notify(pg_url: str) -> None:
    from app.db.engine import create_engine
    from tests.conftest import truncate_all

    writer_engine, reader_engine = create_engine(pg_url), create_engine(pg_url)
    writer_hub = EventHub(writer_engine, retention_seconds=60)
    reader_hub = EventHub(reader_engine, retention_seconds=60)
    await reader_hub.start()
    try:
        tid = await add_thread(writer_engine)
        rid = await add_run(writer_engine, tid)
        await set_status(writer_engine, rid, "running")
        got: list[Any] = []

        async def follow() -> None:
            async for ev in reader_hub.read(rid, tenant_id=TENANT, after_seq=0, heartbeat=30):
                got.append(ev)
                if len(got) == 3:
                    return

        reader = asyncio.create_task(follow())
        pub = writer_hub.publisher(run_id=rid, thread_id=tid, tenant_id=TENANT, last_seq=0)
        started = asyncio.get_running_loop().time()
        for i in range(3):
            pub.emit("values", str(i))
            await pub.flush()
            await asyncio.sleep(0.05)
        await asyncio.wait_for(reader, timeout=5)
        # Woken by NOTIFY, not by the 30 s heartbeat poll.
        assert asyncio.get_running_loop().time() - started < 3
        assert [ev.data for ev in got] == ["0", "1", "2"]
        pub.close(ended=False)
    finally:
        await reader_hub.stop()
        await truncate_all(writer_engine)
        await writer_engine.dispose()
        await reader_engine.dispose()

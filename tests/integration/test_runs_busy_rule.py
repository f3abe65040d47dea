"""The busy rule ("another active run keeps the thread busy"), written once in
app/threads/run_status.py, on real PostgreSQL and SQLite through every way a run's end is
written: the portable settle transaction (`run_status.settle_thread`, which `finish.give_up`
and the SQLite settle use), and on PostgreSQL the one-statement settle (`finish.settle`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.runs import finish
from app.runs.events import EventHub
from app.runs.fencing import FencingToken
from app.statuses import RunStatus, ThreadStatus
from tests.integration.test_runs_queue import TENANT, add_run, add_thread, set_status

Ender = Callable[[AsyncEngine, EventHub, str, str], Awaitable[ThreadStatus | None]]


async def _give_up(engine: AsyncEngine, hub: EventHub, tid: str, rid: str) -> ThreadStatus | None:
    settled, _ = await finish.give_up(
        engine,
        hub,
        token=FencingToken(rid, 1),
        thread_id=tid,
        tenant_id=TENANT,
        error={"error": "X", "message": "ended"},
        after_seq=0,
    )
    return settled


async def _settle_in_one(
    engine: AsyncEngine, hub: EventHub, tid: str, rid: str
) -> ThreadStatus | None:
    end = finish.Finish(
        run_id=rid,
        attempt=1,
        thread_id=tid,
        tenant_id=TENANT,
        rows=[hub.end_row(run_id=rid, thread_id=tid, tenant_id=TENANT, seq=1)],
        wrote_any=False,
        announce=False,  # the NOTIFY is not what is tested
        e_payload="e",
        q_payload="q",
    )
    return await finish.settle(
        engine,
        end,
        status=RunStatus.ERROR,
        error={"error": "X", "message": "ended"},
        thread_status=ThreadStatus.ERROR,
        values={"done": True},
        interrupts={},
        now=utcnow(),
    )


def _enders(engine: AsyncEngine) -> list[Ender]:
    if engine.dialect.name == "postgresql":
        return [_give_up, _settle_in_one]
    return [_give_up]


async def _thread_status(engine: AsyncEngine, tid: str) -> str:
    async with read(engine) as conn:
        row = (await conn.execute(select(threads.c.status).where(threads.c.thread_id == tid))).one()
    return str(row.status)


async def _running(engine: AsyncEngine, tid: str) -> str:
    rid = await add_run(engine, tid)
    await set_status(engine, rid, "running", worker_id="w", attempt=1)
    return rid


@pytest.mark.parametrize("waiting", [RunStatus.PENDING, RunStatus.RUNNING, None])
async def test_another_active_run_keeps_the_thread_busy(
    engine: AsyncEngine, waiting: RunStatus | None
) -> None:
    hub = EventHub(engine, retention_seconds=60)
    for end in _enders(engine):
        tid = await add_thread(engine)
        ending = await _running(engine, tid)
        other: Any = None
        if waiting is RunStatus.PENDING:
            other = await add_run(engine, tid)
        elif waiting is RunStatus.RUNNING:
            other = await _running(engine, tid)
        # a final run of the thread never keeps it busy
        done = await add_run(engine, tid)
        await set_status(engine, done, "success")

        settled = await end(engine, hub, tid, ending)

        expected = ThreadStatus.ERROR if other is None else ThreadStatus.BUSY
        assert settled == expected, end.__name__
        assert await _thread_status(engine, tid) == expected
        async with read(engine) as conn:
            status = (
                await conn.execute(select(runs.c.status).where(runs.c.run_id == ending))
            ).scalar_one()
        assert status == RunStatus.ERROR


async def test_the_rule_is_per_thread_and_per_tenant(engine: AsyncEngine) -> None:
    """Active runs of another thread do not keep this one busy."""
    hub = EventHub(engine, retention_seconds=60)
    for end in _enders(engine):
        tid = await add_thread(engine)
        elsewhere = await add_thread(engine)
        await add_run(engine, elsewhere)
        ending = await _running(engine, tid)
        assert await end(engine, hub, tid, ending) == ThreadStatus.ERROR
        assert await _thread_status(engine, tid) == ThreadStatus.ERROR
        assert await _thread_status(engine, elsewhere) == ThreadStatus.BUSY

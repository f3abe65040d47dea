"""Run fencing on real PostgreSQL and SQLite: once a run was reclaimed, the old attempt's
checkpoint, pending writes, events, renewal and settle are refused and change nothing; the
reaper reclaims a dead worker's run without waiting for its lease; a settle that keeps failing
still ends the run (`error`, thread released, the next queued run proceeds); a graph write
refused while the attempt runs stops it, one still in flight once it settles does not."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from datetime import timedelta
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.checkpoint.saver import SQLSaver
from app.db.tables import checkpoint_writes, checkpoints, run_events, runs, threads
from app.db.types import utcnow
from app.runs import finish, queue, queue_queries
from app.runs.events import EventHub
from app.runs.executor import RunExecutor
from app.runs.fenced_saver import fenced
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.signals import RunSignals
from tests.integration.test_runs_queue import TENANT, add_run, add_thread, set_status


async def _reclaimed(engine: AsyncEngine) -> tuple[str, str, queue.ClaimedRun]:
    """A run claimed by worker `a` (attempt 1), then reclaimed by `b` (attempt 2)."""
    tid = await add_thread(engine)
    rid = await add_run(engine, tid)
    first = await queue.claim(engine, worker_id="a", lease_seconds=30)
    assert first is not None and first.attempt == 1
    await set_status(engine, rid, "running", lease_expires_at=utcnow() - timedelta(seconds=1))
    assert await queue.reap_expired(engine) == [rid]
    second = await queue.claim(engine, worker_id="b", lease_seconds=30)
    assert second is not None and second.attempt == 2
    return tid, rid, second


def _checkpoint(step: int) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"step": step}
    cp["channel_versions"] = {"step": f"{step:032}.0"}
    return cp


async def _count(engine: AsyncEngine, table: Any, thread_id: str) -> int:
    async with engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    select(func.count()).select_from(table).where(table.c.thread_id == thread_id)
                )
            ).scalar_one()
        )


async def test_superseded_attempt_cannot_write_checkpoints(engine: AsyncEngine) -> None:
    tid, rid, _second = await _reclaimed(engine)
    saver = SQLSaver(engine, tenant_id=TENANT)
    refused: list[AttemptSuperseded] = []
    stale = fenced(saver, FencingToken(rid, 1), refused.append)
    current = fenced(saver, FencingToken(rid, 2), refused.append)
    config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    before = metrics.REGISTRY.get_sample_value(
        "graphkeep_run_fenced_writes_refused_total", {"what": "checkpoint"}
    )

    with pytest.raises(AttemptSuperseded):
        await stale.aput(config, _checkpoint(3), {"step": 3}, {"step": f"{3:032}.0"})
    assert await _count(engine, checkpoints, tid) == 0  # nothing landed, blobs neither
    assert [e.what for e in refused] == ["checkpoint"]
    after = metrics.REGISTRY.get_sample_value(
        "graphkeep_run_fenced_writes_refused_total", {"what": "checkpoint"}
    )
    assert (after or 0) - (before or 0) == 1

    # The owning attempt writes; its checkpoint is the thread's newest.
    stored = await current.aput(config, _checkpoint(6), {"step": 6}, {"step": f"{6:032}.0"})
    assert await _count(engine, checkpoints, tid) == 1
    with pytest.raises(AttemptSuperseded):
        await stale.aput_writes(stored, [("step", 7), ("__error__", "x")], "task-1")
    assert await _count(engine, checkpoint_writes, tid) == 0
    await current.aput_writes(stored, [("step", 7)], "task-1")
    assert await _count(engine, checkpoint_writes, tid) == 1
    latest = await saver.aget_tuple(config)
    assert latest is not None and latest.checkpoint["channel_values"] == {"step": 6}

    # Once the run is final nobody writes any more, not even its last attempt.
    await set_status(engine, rid, "success")
    with pytest.raises(AttemptSuperseded):
        await current.aput(config, _checkpoint(8), {"step": 8}, {"step": f"{8:032}.0"})
    # The public saver is not fenced: library users keep plain checkpointer behaviour.
    await saver.aput(config, _checkpoint(9), {"step": 9}, {"step": f"{9:032}.0"})
    assert await _count(engine, checkpoints, tid) == 2


async def test_superseded_attempt_cannot_store_events_renew_or_settle(
    engine: AsyncEngine,
) -> None:
    tid, rid, _second = await _reclaimed(engine)
    hub = EventHub(engine, retention_seconds=60)
    stale = hub.publisher(
        run_id=rid, thread_id=tid, tenant_id=TENANT, last_seq=0, token=FencingToken(rid, 1)
    )
    stale.emit("values", "{}")
    with pytest.raises(AttemptSuperseded):
        await stale.flush()
    with pytest.raises(AttemptSuperseded):
        stale.emit("values", "{}")  # the attempt stops at its next event
    stale.close()
    async with engine.connect() as conn:
        stored = (
            await conn.execute(select(func.count()).where(run_events.c.run_id == rid))
        ).scalar_one()
    assert stored == 0

    # Same worker id, old attempt: the renewal does not hold the run (fenced by attempt).
    await set_status(engine, rid, "running", worker_id="a", attempt=2)
    lost = await queue.renew(engine, run_id=rid, worker_id="a", lease_seconds=30, attempt=1)
    assert lost.held is False
    async with engine.begin() as conn:
        assert not await queue.release(conn, run_id=rid, worker_id="a", attempt=1)

    error = {"error": "X", "message": "stale"}
    with pytest.raises(AttemptSuperseded):
        await finish.give_up(
            engine,
            hub,
            token=FencingToken(rid, 1),
            thread_id=tid,
            tenant_id=TENANT,
            error=error,
            after_seq=0,
        )
    if engine.dialect.name == "postgresql":
        end = finish.Finish(
            run_id=rid,
            attempt=1,
            thread_id=tid,
            tenant_id=TENANT,
            rows=[hub.end_row(run_id=rid, thread_id=tid, tenant_id=TENANT, seq=1)],
            wrote_any=False,
            announce=True,
            e_payload="e",
            q_payload="q",
        )
        with pytest.raises(AttemptSuperseded):
            await finish.settle(
                engine,
                end,
                status="success",
                error=None,
                thread_status="idle",
                values={"stale": True},
                interrupts={},
                now=utcnow(),
            )
    async with engine.connect() as conn:
        row = (await conn.execute(select(runs.c.status).where(runs.c.run_id == rid))).one()
        thread = (
            await conn.execute(select(threads.c["values"]).where(threads.c.thread_id == tid))
        ).one()
    assert row.status == "running" and thread[0] is None  # the stale settle changed nothing

    # The owner gives up cleanly: final status, error + end events, thread released.
    settled, error_seq = await finish.give_up(
        engine,
        hub,
        token=FencingToken(rid, 2),
        thread_id=tid,
        tenant_id=TENANT,
        error=error,
        after_seq=0,
    )
    assert settled == "error" and error_seq == 2
    async with engine.connect() as conn:
        events = (
            await conn.execute(
                select(run_events.c.seq, run_events.c.event)
                .where(run_events.c.run_id == rid)
                .order_by(run_events.c.seq)
            )
        ).all()
    # seq 1 was published here by the stale attempt (a reader here may have seen it): the
    # owner's events come after it, never reusing a seq a client saw
    assert [tuple(e) for e in events] == [(2, "error"), (3, "__end__")]


async def test_reaper_reclaims_dead_workers_run_without_waiting_for_the_lease(
    engine: AsyncEngine,
) -> None:
    tid = await add_thread(engine)
    dead_rid = await add_run(engine, tid)
    live_rid = await add_run(engine, await add_thread(engine))
    host = socket.gethostname()
    if engine.dialect.name == "postgresql":
        dead, alive = f"{host}:1:{uuid.uuid4().hex[:8]}", f"{host}:2:{uuid.uuid4().hex[:8]}"
        holder = await engine.connect()  # the live worker's liveness connection
        await holder.execution_options(isolation_level="AUTOCOMMIT")
        await holder.execute(queue_queries.liveness_lock(alive))
    else:
        # a pid that is gone (a child that exited), and a live one (our parent)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        dead, alive = f"{host}:{pid}:dead", f"{host}:{os.getppid()}:alive"
        holder = None
    try:
        lease = utcnow() + timedelta(seconds=300)  # far from expiring
        await set_status(engine, dead_rid, "running", worker_id=dead, lease_expires_at=lease)
        await set_status(engine, live_rid, "running", worker_id=alive, lease_expires_at=lease)
        assert await queue.reap_expired(engine) == []  # leases alone: nothing is due
        reaped = await queue.reap_expired(engine, own_worker_id=f"{host}:{os.getpid()}:me")
        assert reaped == [dead_rid]
        again = await queue.claim(engine, worker_id="next", lease_seconds=30)
        assert again is not None and again.run_id == dead_rid and again.attempt == 1
    finally:
        if holder is not None:
            await holder.invalidate()  # the session ends (not back to the pool)
            await holder.close()
    await set_status(engine, dead_rid, "success")
    if engine.dialect.name == "postgresql":
        # its session gone, the lock goes with it: the run is reclaimed on the next sweep
        assert await queue.reap_expired(engine, own_worker_id="me") == [live_rid]


# --------------------------------------------------------------------------- every run ends


def _given_up(graph_id: str) -> float:
    """Runs of `graph_id` given up, whatever the reason (the driver's error class)."""
    return sum(
        sample.value
        for family in metrics.RUNS_GIVEN_UP.collect()
        for sample in family.samples
        if sample.name == "graphkeep_runs_given_up_total" and sample.labels["graph_id"] == graph_id
    )


async def _refuse_thread_values(engine: AsyncEngine, thread_id: str, *, on: bool) -> None:
    """A real failure in the settle path: the database refuses to store the thread's values
    (as a wrong encryption key or a broken state would make the settle fail)."""
    async with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            if on:
                await conn.exec_driver_sql(
                    "CREATE OR REPLACE FUNCTION gk_refuse_values() RETURNS trigger AS $$ "
                    "BEGIN RAISE EXCEPTION 'injected settle failure'; END $$ LANGUAGE plpgsql"
                )
                await conn.exec_driver_sql(
                    'CREATE TRIGGER gk_refuse BEFORE UPDATE OF "values" ON threads FOR EACH ROW '
                    f"WHEN (NEW.thread_id = '{thread_id}') EXECUTE FUNCTION gk_refuse_values()"
                )
            else:
                await conn.exec_driver_sql("DROP TRIGGER gk_refuse ON threads")
        elif on:
            await conn.exec_driver_sql(
                'CREATE TRIGGER gk_refuse BEFORE UPDATE OF "values" ON threads '
                f"WHEN NEW.thread_id = '{thread_id}' "
                "BEGIN SELECT RAISE(ABORT, 'injected settle failure'); END"
            )
        else:
            await conn.exec_driver_sql("DROP TRIGGER gk_refuse")


async def test_a_run_whose_settle_keeps_failing_still_ends(
    make_client: Any, engine: AsyncEngine
) -> None:
    client = await make_client(max_attempts=2)
    tid = str((await client.post("/threads", json={})).json()["thread_id"])
    before = _given_up("echo")
    await _refuse_thread_values(engine, tid, on=True)
    try:
        first = (
            await client.post(f"/threads/{tid}/runs", json={"assistant_id": "echo", "input": {}})
        ).json()
        queued = (
            await client.post(
                f"/threads/{tid}/runs",
                json={
                    "assistant_id": "steps",
                    "input": {"tag": f"q-{uuid.uuid4().hex[:6]}", "sleep": 1.5},
                    "multitask_strategy": "enqueue",
                },
            )
        ).json()
        out = (await client.get(f"/threads/{tid}/runs/{first['run_id']}/join")).json()
    finally:
        await _refuse_thread_values(engine, tid, on=False)
    assert out.get("__error__", {}).get("error") == "RunSettleFailed", out
    run = (await client.get(f"/threads/{tid}/runs/{first['run_id']}")).json()
    assert run["status"] == "error"
    async with engine.connect() as conn:
        attempt = (
            await conn.execute(select(runs.c.attempt).where(runs.c.run_id == first["run_id"]))
        ).scalar_one()
    assert attempt == 2  # handed on once, then ended by its last allowed attempt
    assert _given_up("echo") - before == 1
    # The thread was released: the queued run ran and succeeded.
    done = (await client.get(f"/threads/{tid}/runs/{queued['run_id']}/join")).json()
    assert done["trail"] == ["a", "b", "c"], done
    assert (await client.get(f"/threads/{tid}/runs/{queued['run_id']}")).json()[
        "status"
    ] == "success"
    assert (await client.get(f"/threads/{tid}")).json()["status"] == "idle"


@pytest.mark.parametrize("settling", [False, True])
async def test_a_refused_graph_write_stops_a_running_attempt_but_not_its_settle(
    engine: AsyncEngine, settling: bool
) -> None:
    """The upstream suite's cancel test hung on SQLite: a cancelled graph's last checkpoint
    (durability "async") was still in flight when the attempt's own settle ended the run; the
    fence refused it (right), and the refusal cancelled the attempt's task in the middle of
    its settle (wrong): the thread stream's root terminal was never logged."""
    tid = await add_thread(engine)
    rid = await add_run(engine, tid)
    claimed = await queue.claim(engine, worker_id="a", lease_seconds=30)
    assert claimed is not None and claimed.run_id == rid
    executor = RunExecutor(
        engine=engine,
        hub=EventHub(engine, retention_seconds=60),
        graphs=None,
        saver=SQLSaver(engine),
        store=None,
        run_timeout_seconds=None,
        max_attempts=3,
    )
    signals = RunSignals()
    config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    late: list[asyncio.Task[Any]] = []
    went_on: list[bool] = []

    async def attempt() -> None:
        view = executor._fenced_saver(claimed, signals)  # as the executor hands it the graph
        signals.settling = settling
        # settled (or, running, taken by a newer attempt): the run is no longer this one's
        await set_status(engine, rid, "interrupted")
        late.append(  # a write the graph left behind in a background task
            asyncio.create_task(
                view.aput(config, _checkpoint(1), {"step": 1}, {"step": f"{1:032}.0"})
            )
        )
        await asyncio.wait(late)  # a cancel of this task lands here
        await asyncio.sleep(0.05)
        went_on.append(True)  # the settle's next statements, the root terminal

    task = asyncio.create_task(attempt())
    if settling:
        await task
        assert went_on and signals.superseded is None and not signals.abandon
    else:
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not went_on and signals.superseded == "checkpoint" and signals.abandon
    assert isinstance(late[0].exception(), AttemptSuperseded)  # refused either way
    assert await _count(engine, checkpoints, tid) == 0

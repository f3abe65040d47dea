"""Retention of the thread-stream log on both dialects (contract section 8): `POST
/threads/prune` keep_latest and the thread TTL's keep_latest trim the log to the newest run,
the age sweep expires older runs' events, a pending run's events are never trimmed, and a
cursor older than what is kept gets `resume_gap`, never a silently shorter replay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.db.tables import runs, thread_events, threads
from app.db.types import utcnow
from app.ops.retention import ThreadTTLPolicy, build_sweepers, sweep_threads
from app.runs.threadlog import queries
from app.runs.threadlog.log import LogEvent, ResumeGap, ThreadLog
from app.runs.threadlog.retention import log_sweeper, log_trimmer, sweep_logs, trim

TENANT = "default"  # no auth configured: every call is the default tenant


def _log(engine: AsyncEngine) -> ThreadLog:
    return ThreadLog(engine, hub=None)  # type: ignore[arg-type]  # reads need no hub


async def _all(engine: AsyncEngine, thread_id: str) -> list[LogEvent]:
    return await _log(engine).read_after(tenant_id=TENANT, thread_id=thread_id, since=0)


async def _run(client: Any, thread_id: str, text: str) -> str:
    """One protocol run (`run.start`), waited for until its root terminal is logged."""
    r = await client.post(
        f"/threads/{thread_id}/commands",
        json={
            "id": 1,
            "method": "run.start",
            "params": {"assistant_id": "echo", "input": {"text": text}},
        },
    )
    assert r.status_code == 200 and r.json()["type"] == "success", r.text
    run_id = str(r.json()["result"]["run_id"])
    for _ in range(300):
        # the root terminal is logged after the run's end commits: wait for both
        run = (await client.get(f"/threads/{thread_id}/runs/{run_id}")).json()
        last = (await _all(client.engine, thread_id))[-1:]
        if (
            run["status"] == "success"
            and last
            and last[0].method == "lifecycle"
            and '"completed"' in last[0].data
        ):
            return run_id
        await asyncio.sleep(0.05)
    raise AssertionError("run did not finish")


async def _roots(engine: AsyncEngine, thread_id: str) -> list[str]:
    return [
        e.data
        for e in await _all(engine, thread_id)
        if e.method == "lifecycle" and e.namespace == []
    ]


@pytest.fixture
async def client(make_client: Any, engine: AsyncEngine) -> Any:
    c = await make_client()
    c.engine = engine
    return c


async def _three_runs(client: Any) -> tuple[str, list[LogEvent]]:
    thread_id = str(uuid.uuid4())
    for text in ("a", "b", "c"):
        await _run(client, thread_id, text)
    return thread_id, await _all(client.engine, thread_id)


async def test_prune_keep_latest_trims_log_and_old_cursors_get_a_gap(
    client: Any, engine: AsyncEngine
) -> None:
    thread_id, before = await _three_runs(client)
    assert [e.seq for e in before] == list(range(1, len(before) + 1))
    runs_before = len(await _roots(engine, thread_id))
    assert runs_before == 6  # running + completed per run
    last_running = max(e.seq for e in before if e.method == "lifecycle" and '"running"' in e.data)
    r = await client.post(
        "/threads/prune", json={"thread_ids": [thread_id], "strategy": "keep_latest"}
    )
    assert r.status_code == 200 and r.json() == {"pruned_count": 1}
    after = await _all(engine, thread_id)
    # the tombstone at the last removed seq, then the newest run whole, same seq and ids
    assert after[0].method == queries.TRIMMED and after[0].seq == last_running - 1
    assert after[1:] == [e for e in before if e.seq >= last_running]
    log = _log(engine)
    for since in (0, None, last_running - 1, last_running, before[-1].seq):
        await log.check_cursor(tenant_id=TENANT, thread_id=thread_id, since=since)
    for since in (1, last_running - 2):
        with pytest.raises(ResumeGap) as gap:
            await log.check_cursor(tenant_id=TENANT, thread_id=thread_id, since=since)
        assert gap.value.min_available_seq == last_running
        assert gap.value.envelope(7) == {
            "type": "error",
            "id": 7,
            "error": "resume_gap",
            "message": str(gap.value),
            "since": since,
            "min_available_seq": last_running,
        }
    # pruning again removes nothing more; a later run continues the seq (never reused)
    r = await client.post(
        "/threads/prune", json={"thread_ids": [thread_id], "strategy": "keep_latest"}
    )
    assert await _all(engine, thread_id) == after
    await _run(client, thread_id, "d")
    latest = await _all(engine, thread_id)
    assert latest[len(after)].seq == before[-1].seq + 1
    # the next prune moves the tombstone up to just before run "d"
    await client.post("/threads/prune", json={"thread_ids": [thread_id], "strategy": "keep_latest"})
    again = await _all(engine, thread_id)
    assert again[0].method == queries.TRIMMED and again[0].seq == before[-1].seq
    assert again[1:] == latest[len(after) :]


async def test_prune_of_unknown_or_bad_ids(client: Any, engine: AsyncEngine) -> None:
    thread_id, before = await _three_runs(client)
    r = await client.post(
        "/threads/prune", json={"thread_ids": [str(uuid.uuid4())], "strategy": "keep_latest"}
    )
    assert r.status_code == 200 and r.json() == {"pruned_count": 0}
    r = await client.post(
        "/threads/prune", json={"thread_ids": ["nope"], "strategy": "keep_latest"}
    )
    assert r.status_code == 422
    assert await _all(engine, thread_id) == before  # nothing of this thread was touched


async def test_ttl_keep_latest_trims_the_log(client: Any, engine: AsyncEngine) -> None:
    thread_id, before = await _three_runs(client)
    now = utcnow()
    async with engine.begin() as conn:
        await conn.execute(
            update(threads)
            .where(threads.c.thread_id == thread_id)
            .values(ttl_minutes=60, ttl_strategy="keep_latest", expires_at=now)
        )
    done = await sweep_threads(
        engine, SQLSaver(engine), ThreadTTLPolicy(), now=now, trim_log=log_trimmer(engine)
    )
    assert done.pruned == 1
    after = await _all(engine, thread_id)
    assert after[0].method == queries.TRIMMED
    assert await _roots(engine, thread_id) == [
        e.data for e in before[-len(after) + 1 :] if e.method == "lifecycle" and e.namespace == []
    ]
    assert len(await _roots(engine, thread_id)) == 2


async def test_age_sweep_keeps_young_events_newest_and_pending_runs(
    client: Any, engine: AsyncEngine
) -> None:
    thread_id, before = await _three_runs(client)
    # a cutoff before every event: nothing is old enough
    assert (
        await sweep_logs(
            engine,
            cutoff=datetime.fromtimestamp(before[0].timestamp / 1000, UTC) - timedelta(seconds=1),
        )
        == 0
    )
    assert await _all(engine, thread_id) == before
    # a cutoff after every event (retention 0 s, the sweeper's clock 1 s ahead): all but the
    # newest run goes, through the stream-event sweeper as the server wires it
    sweepers = build_sweepers(
        engine=engine,
        saver=SQLSaver(engine),
        store=None,
        checkpointer_ttl=None,
        sweep_interval_seconds=60,
        stream_event_retention_seconds=0,
        trim_log=log_trimmer(engine),
        sweep_log=log_sweeper(engine),
    )
    sweepers = dataclasses.replace(sweepers, clock=lambda: utcnow() + timedelta(seconds=1))
    await sweepers.run_events_once()
    after = await _all(engine, thread_id)
    assert after[0].method == queries.TRIMMED
    assert len([e for e in after if e.method == "lifecycle" and e.namespace == []]) == 2
    # a run still pending keeps its events even when it is not the newest writer's
    other, events = await _three_runs(client)
    first_run_start = events[0]
    async with engine.begin() as conn:
        first_run = (
            await conn.execute(
                thread_events.select().where(
                    thread_events.c.thread_id == other, thread_events.c.seq == first_run_start.seq
                )
            )
        ).first()
        await conn.execute(
            update(runs).where(runs.c.run_id == first_run.run_id).values(status="pending")
        )
    assert await trim(engine, tenant_id=TENANT, thread_id=other) == 0
    assert await _all(engine, other) == events
    # another tenant's trim finds nothing of this thread
    assert await trim(engine, tenant_id="someone-else", thread_id=other) == 0

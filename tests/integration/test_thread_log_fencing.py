"""The thread log's appends are fenced (app/runs/fencing.py) on both dialects: a run attempt
that no longer owns its run appends nothing, in the same statement; seqs are per thread and
dense; a settled attempt may append only its own terminal."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import runs, thread_events
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.threadlog.log import ThreadLog
from tests.integration.threadlog_rows import seed_thread_run


async def _seqs(engine: AsyncEngine, thread_id: str) -> list[int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(thread_events.c.seq).where(thread_events.c.thread_id == thread_id)
        )
        return sorted(int(r.seq) for r in rows)


async def test_only_the_owning_attempt_appends(engine: AsyncEngine) -> None:
    thread_id, run_id = await seed_thread_run(engine, attempt=2, status="running")
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    owner, stale = FencingToken(run_id, 2), FencingToken(run_id, 1)
    event = ("values", [], {"x": 1})
    await log.append(tenant_id="t1", thread_id=thread_id, token=owner, events=[event, event])
    with pytest.raises(AttemptSuperseded):
        await log.append(tenant_id="t1", thread_id=thread_id, token=stale, events=[event])
    assert await _seqs(engine, thread_id) == [1, 2]
    # settled: the running fence refuses, the settled fence lets this attempt's terminal in
    async with engine.begin() as conn:
        await conn.execute(update(runs).where(runs.c.run_id == run_id).values(status="success"))
    with pytest.raises(AttemptSuperseded):
        await log.append(tenant_id="t1", thread_id=thread_id, token=owner, events=[event])
    with pytest.raises(AttemptSuperseded):
        await log.append(
            tenant_id="t1", thread_id=thread_id, token=stale, events=[event], settled=True
        )
    await log.append(tenant_id="t1", thread_id=thread_id, token=owner, events=[event], settled=True)
    assert await _seqs(engine, thread_id) == [1, 2, 3]
    got = await log.read_after(tenant_id="t1", thread_id=thread_id, since=1)
    assert [e.event_id for e in got] == ["2", "3"]
    # another tenant reads nothing of it
    assert await log.read_after(tenant_id="t2", thread_id=thread_id, since=0) == []


async def test_one_statement_append_is_fenced(engine: AsyncEngine) -> None:
    """The root lifecycle's append (one statement; on PostgreSQL with its NOTIFY inside, the
    hub here not knowing itself alone) refuses a superseded attempt as `append` does."""
    thread_id, run_id = await seed_thread_run(engine, attempt=2, status="running")
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    owner, stale = FencingToken(run_id, 2), FencingToken(run_id, 1)
    event = ("lifecycle", [], {"event": "running"})
    await log.append(tenant_id="t1", thread_id=thread_id, token=owner, events=[event])
    with pytest.raises(AttemptSuperseded):
        await log.append(tenant_id="t1", thread_id=thread_id, token=stale, events=[event])
    await log.append(tenant_id="t1", thread_id=thread_id, token=owner, events=[event, event])
    assert await _seqs(engine, thread_id) == [1, 2, 3]


async def test_one_append_of_many_events_keeps_their_order(engine: AsyncEngine) -> None:
    """A batch of any size is one statement whose rows arrive as parameters (unnest on
    PostgreSQL, json_each on SQLite): each event gets the seq of its position, and its
    method, namespace and data as given, after what the thread held."""
    thread_id, run_id = await seed_thread_run(engine, attempt=1, status="running")
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    token = FencingToken(run_id, 1)
    await log.append(
        tenant_id="t1", thread_id=thread_id, token=token, events=[("lifecycle", [], {"a": 0})]
    )
    events = [
        ("messages" if i % 3 else "custom", ["sub:1"] if i % 2 else [], {"i": i, "t": 'é"\n'})
        for i in range(700)
    ]
    await log.append(tenant_id="t1", thread_id=thread_id, token=token, events=events)
    got = await log.read_after(tenant_id="t1", thread_id=thread_id, since=1)
    assert [e.seq for e in got] == list(range(2, 702))
    assert [e.event_id for e in got] == [str(s) for s in range(2, 702)]
    assert [(e.method, e.namespace, json.loads(e.data)) for e in got] == [
        (m, ns, d) for m, ns, d in events
    ]

"""How a run ends, on both dialects (PostgreSQL: one statement, app/runs/finish.py; SQLite: a
transaction): final status, stored events with their expiry and the end marker, the thread's
status / values, busy while another run waits, and a stateless run's temporary thread,
checkpoints and run gone with it (or kept with on_completion=keep)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.auth.principal import DEFAULT_TENANT
from app.config import Settings
from app.db.tables import checkpoints, run_events, runs, thread_events, threads
from app.main import create_app
from app.runs.events import END_EVENT, EventHub
from app.runs.threadlog.log import ThreadLog

GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "langgraph.json"


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url=db_url, config_file=GRAPHS, workers=2, log_level="WARNING")
    app = create_app(settings)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30
        ) as http:
            yield http
    finally:
        await lifespan.__aexit__(None, None, None)


async def _count(engine: AsyncEngine, table: Any, **where: str) -> int:
    stmt = select(func.count()).select_from(table)
    for column, value in where.items():
        stmt = stmt.where(table.c[column] == value)
    async with engine.connect() as conn:
        return int((await conn.execute(stmt)).scalar_one())


async def _events(engine: AsyncEngine, run_id: str) -> list[Any]:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                select(run_events.c.seq, run_events.c.event, run_events.c.expires_at)
                .where(run_events.c.run_id == run_id)
                .order_by(run_events.c.seq)
            )
        ).all()


def _history_count() -> float:
    return sum(
        s.value
        for m in metrics.THREAD_HISTORY.collect()
        for s in m.samples
        if s.name.endswith("_count")
    )


async def test_thread_run_ends_in_one_write(client: httpx.AsyncClient, engine: AsyncEngine) -> None:
    tid = (await client.post("/threads", json={})).json()["thread_id"]
    before = _history_count()
    r = await client.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "echo", "input": {"text": "hi"}}
    )
    assert r.status_code == 200, r.text
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    run = (await client.get(f"/threads/{tid}/runs/{run_id}")).json()
    assert run["status"] == "success"
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "idle"
    assert thread["values"] == r.json()
    events = await _events(engine, run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].event == "metadata" and events[-1].event == END_EVENT
    assert all(e.expires_at is not None for e in events)
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(runs.c.worker_id, runs.c.lease_expires_at, runs.c.ended_at).where(
                    runs.c.run_id == run_id
                )
            )
        ).one()
    assert row.worker_id is None and row.lease_expires_at is None and row.ended_at is not None
    for _ in range(50):  # observed once the run is settled
        if _history_count() > before:
            break
        await asyncio.sleep(0.05)
    assert _history_count() == before + 1


async def test_thread_stays_busy_while_another_run_waits(client: httpx.AsyncClient) -> None:
    tid = (await client.post("/threads", json={})).json()["thread_id"]
    slow = {"assistant_id": "steps", "input": {"tag": "busy", "sleep": 0.6}}
    first = (await client.post(f"/threads/{tid}/runs", json=slow)).json()
    second = (
        await client.post(
            f"/threads/{tid}/runs",
            json={**slow, "input": {"tag": "busy2", "sleep": 0.3}, "multitask_strategy": "enqueue"},
        )
    ).json()
    await client.get(f"/threads/{tid}/runs/{first['run_id']}/join")
    # the first run ended while the second was pending: the thread stayed busy
    seen = (await client.get(f"/threads/{tid}")).json()["status"]
    assert seen == "busy"
    await client.get(f"/threads/{tid}/runs/{second['run_id']}/join")
    for _ in range(50):
        if (await client.get(f"/threads/{tid}")).json()["status"] == "idle":
            break
        await asyncio.sleep(0.05)
    assert (await client.get(f"/threads/{tid}")).json()["status"] == "idle"
    runs_ = (await client.get(f"/threads/{tid}/runs")).json()
    assert {r["status"] for r in runs_} == {"success"}


async def test_stateless_run_takes_its_thread_along(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    r = await client.post("/runs/wait", json={"assistant_id": "echo", "input": {"text": "x"}})
    assert r.status_code == 200 and r.json() == {"text": "x"}
    tid = r.headers["location"].split("/")[2]
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    for _ in range(50):  # SQLite deletes right after the answer; PostgreSQL with the end
        if await _count(engine, threads, thread_id=tid) == 0:
            break
        await asyncio.sleep(0.05)
    assert await _count(engine, threads, thread_id=tid) == 0
    assert await _count(engine, runs, run_id=run_id) == 0
    assert await _count(engine, checkpoints, thread_id=tid) == 0
    events = await _events(engine, run_id)  # stored and expiring like any run's
    assert [e.event for e in events][0] == "metadata" and events[-1].event == END_EVENT
    assert all(e.expires_at is not None for e in events)


@pytest.mark.parametrize("mode", ["updates", "values"])
async def test_stateless_run_kept(
    client: httpx.AsyncClient, engine: AsyncEngine, mode: str
) -> None:
    body = {
        "assistant_id": "echo",
        "input": {"text": "k"},
        "on_completion": "keep",
        "stream_mode": [mode],
    }
    r = await client.post("/runs/wait", json=body)
    assert r.status_code == 200 and r.json() == {"text": "k"}
    tid = r.headers["location"].split("/")[2]
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "idle" and thread["values"] == {"text": "k"}
    assert (await client.get(f"/threads/{tid}/state")).json()["values"] == {"text": "k"}


@pytest.mark.parametrize(
    ("graph", "body", "terminal"),
    [
        ("echo", {"text": "hi"}, {"event": "completed", "graph_name": "echo"}),
        ("asker", {"question": "ok?"}, {"event": "interrupted", "graph_name": "asker"}),
        ("failing", {"tag": "x"}, {"event": "failed", "graph_name": "failing", "error": "boom: x"}),
    ],
)
async def test_root_lifecycle_ends_with_the_run(
    client: httpx.AsyncClient, engine: AsyncEngine, graph: str, body: Any, terminal: Any
) -> None:
    """The thread stream's root `running`, then the terminal the run's end stored with it
    (PostgreSQL: in the settle statement), by this attempt, at the thread's next seqs; the
    terminal follows the thread's new status (`interrupted` when an interrupt waits)."""
    tid = (await client.post("/threads", json={})).json()["thread_id"]
    r = await client.post(f"/threads/{tid}/runs/wait", json={"assistant_id": graph, "input": body})
    assert r.status_code == 200, r.text
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    log = ThreadLog(engine, EventHub(engine, retention_seconds=60))
    got = await log.read_after(tenant_id=DEFAULT_TENANT, thread_id=tid, since=0)
    assert [(e.seq, e.method, e.namespace) for e in got] == [
        (1, "lifecycle", []),
        (2, "lifecycle", []),
    ]
    assert json.loads(got[0].data) == {"event": "running", "graph_name": graph}
    assert json.loads(got[1].data) == terminal
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                select(thread_events.c.run_id, thread_events.c.attempt).where(
                    thread_events.c.thread_id == tid
                )
            )
        ).all()
    assert {(row.run_id, row.attempt) for row in rows} == {(run_id, 1)}

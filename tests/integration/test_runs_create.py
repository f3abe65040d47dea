"""Run creation, one path on real PostgreSQL and SQLite (app/runs/service.py): a new or idle
thread takes the quick statements (PostgreSQL: the read and ONE write; SQLite: the read and
two writes in its transaction), a busy thread the locking transaction; the answer is the run
as written; a strict resume is refused inside the create's write, with nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.tables import runs, threads
from app.main import create_app

GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "langgraph.json"

WATCHED = ("runs", "threads", "assistants")


@contextmanager
def statements() -> Iterator[list[str]]:
    """The SQL statements every engine of this process sends meanwhile that touch runs,
    threads or assistants (the app's own engine included)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        if any(name in sql for name in WATCHED):
            seen.append(sql)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


@asynccontextmanager
async def _client(db_url: str, workers: int) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=db_url, config_file=GRAPHS, workers=workers, log_level="WARNING"
    )
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


@pytest.fixture
async def idle_client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """No workers: runs stay pending, and nothing but the request talks to the database."""
    async with _client(db_url, 0) as client:
        yield client


def _writes(engine: AsyncEngine) -> int:
    # PostgreSQL: one chained statement; SQLite: the run insert and the busy mark
    return 1 if engine.dialect.name == "postgresql" else 2


async def test_a_run_on_an_idle_or_new_thread_takes_the_quick_statements(
    idle_client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    tid = (await idle_client.post("/threads", json={"metadata": {"k": "v"}})).json()["thread_id"]
    with statements() as seen:
        created = await idle_client.post(f"/threads/{tid}/runs", json={"assistant_id": "echo"})
    assert created.status_code == 200, created.text
    assert len(seen) == 1 + _writes(engine), seen  # the snapshot read, then the writes
    assert not any("FOR UPDATE" in sql and sql.startswith("SELECT threads") for sql in seen)
    run = created.json()
    assert run["status"] == "pending"
    thread = (await idle_client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "busy"
    assert thread["metadata"]["k"] == "v" and thread["metadata"]["graph_id"] == "echo"

    with statements() as seen:
        stateless = await idle_client.post("/runs", json={"assistant_id": "echo"})
    assert stateless.status_code == 200, stateless.text
    # the snapshot, then the temporary thread and its run (one statement on PostgreSQL)
    assert len(seen) == 1 + _writes(engine), seen

    # busy now: the second run queues behind the first through the locking transaction
    with statements() as seen:
        queued = await idle_client.post(
            f"/threads/{tid}/runs", json={"assistant_id": "echo", "multitask_strategy": "enqueue"}
        )
    assert queued.status_code == 200, queued.text
    assert len(seen) > 1 + _writes(engine)
    async with engine.connect() as conn:
        count = (
            await conn.execute(select(func.count()).where(runs.c.thread_id == tid))
        ).scalar_one()
    assert count == 2


async def test_the_create_answer_is_the_run_as_written(db_url: str) -> None:
    """A run a free local slot takes at once is written `running`, and says so."""
    async with _client(db_url, 2) as client:
        await _as_written(client)


async def _as_written(client: httpx.AsyncClient) -> None:
    tid = (await client.post("/threads", json={})).json()["thread_id"]
    created = (
        await client.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "steps", "input": {"tag": "as-written", "sleep": 0.3}},
        )
    ).json()
    assert created["status"] == "running"
    await client.get(f"/threads/{tid}/runs/{created['run_id']}/join")
    queued = (
        await client.post(
            f"/threads/{tid}/runs", json={"assistant_id": "echo", "after_seconds": 60}
        )
    ).json()
    assert queued["status"] == "pending"  # scheduled for later: not dispatched


async def test_strict_resume_is_refused_inside_the_create(
    idle_client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    """A resume naming no pending interrupt: 409, and neither a run nor a thread change."""
    tid = (await idle_client.post("/threads", json={})).json()["thread_id"]
    body = {
        "assistant_id": "echo",
        "command": {"resume": {"0" * 32: "yes"}},
        "strict_resume": True,
    }
    refused = await idle_client.post(f"/threads/{tid}/runs", json=body)
    assert refused.status_code == 409, refused.text
    assert "UnknownInterruptError" in refused.text
    async with engine.connect() as conn:
        count = (
            await conn.execute(select(func.count()).where(runs.c.thread_id == tid))
        ).scalar_one()
        status = (
            await conn.execute(select(threads.c.status).where(threads.c.thread_id == tid))
        ).scalar_one()
    assert count == 0 and status == "idle"

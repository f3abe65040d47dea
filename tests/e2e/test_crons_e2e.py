"""Crons against live `graphkeep serve` processes: the official client's `crons.*`, two
servers on one PostgreSQL firing each due time once, and a scheduler killed (-9) after its
claim and before its commit: the firing happens once, later, elsewhere."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.tables import crons, runs
from app.db.types import utcnow
from tests.conftest import migrated_pg_database
from tests.e2e import runs_fixtures
from tests.e2e.runs_fixtures import Live
from tests.e2e.runs_server import ROOT, serve

pytestmark = pytest.mark.e2e
live = runs_fixtures.live
FAST = {"GRAPHKEEP_CRON_POLL_SECONDS": "0.2"}
# Crons made due by backdating only: once fired, the next slot is months away. Every minute
# ("* * * * *"), a test slowed past a minute boundary on a loaded box saw a rightful extra
# firing that it counted as a double (assert {3} == {2}).
YEARLY = "0 0 1 1 *"


async def test_official_client_crons(live: Live) -> None:
    client = get_client(url=live.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    on_thread = await client.crons.create_for_thread(
        tid, "steps", schedule="*/5 * * * *", input={"tag": "c"}, multitask_strategy="enqueue"
    )
    assert on_thread["thread_id"] == tid and on_thread["schedule"] == "*/5 * * * *"
    end = datetime.now(UTC) + timedelta(days=7)
    stateless = await client.crons.create(
        "steps",
        schedule="0 12 * * *",
        input={"tag": "d"},
        metadata={"k": "v"},
        end_time=end,
        timezone="America/New_York",
    )
    assert stateless["thread_id"] is None and stateless["timezone"] == "America/New_York"
    assert set(stateless) >= {
        "cron_id",
        "assistant_id",
        "thread_id",
        "schedule",
        "timezone",
        "end_time",
        "enabled",
        "on_run_completed",
        "payload",
        "metadata",
        "user_id",
        "next_run_date",
        "created_at",
        "updated_at",
    }
    found = await client.crons.search(assistant_id=stateless["assistant_id"], limit=10)
    assert {c["cron_id"] for c in found} == {on_thread["cron_id"], stateless["cron_id"]}
    assert len(await client.crons.search(thread_id=tid)) == 1
    assert len(await client.crons.search(metadata={"k": "v"}, select=["cron_id"])) == 1
    assert await client.crons.count() == 2
    assert await client.crons.count(thread_id=tid) == 1
    updated = await client.crons.update(
        stateless["cron_id"], schedule="0 13 * * *", enabled=False, end_time=None
    )
    assert updated["enabled"] is False and updated["end_time"] is None
    assert updated["schedule"] == "0 13 * * *"
    await client.crons.delete(on_thread["cron_id"])
    assert await client.crons.count() == 1
    with pytest.raises(NotFoundError):
        await client.crons.delete(on_thread["cron_id"])
    with pytest.raises(UnprocessableEntityError):
        await client.crons.create("steps", schedule="0 0 30 2 *")
    with pytest.raises(NotFoundError):
        await client.crons.create_for_thread(
            "00000000-0000-4000-8000-000000000009", "steps", schedule="*/5 * * * *"
        )


@pytest.fixture
def pg_db() -> Iterator[str]:
    with migrated_pg_database("gk_crons_e2e") as url:
        yield url


@pytest.fixture
async def pg(pg_db: str) -> AsyncIterator[tuple[str, AsyncEngine]]:
    engine = create_engine(pg_db)
    try:
        yield pg_db, engine
    finally:
        await engine.dispose()


async def _runs_by_cron(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(runs.c.metadata))).all()
    out: dict[str, int] = {}
    for (m,) in rows:
        if m and m.get("cron_id"):
            out[m["cron_id"]] = out.get(m["cron_id"], 0) + 1
    return out


async def _backdate_all(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(crons).values(next_run_date=utcnow() - timedelta(seconds=1)))


async def _settle(engine: AsyncEngine, want: int, timeout: float = 30) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while sum((got := await _runs_by_cron(engine)).values()) < want:
        assert time.monotonic() < deadline, f"{sum(got.values())} of {want} firings"
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # several more ticks of both schedulers: nothing more may fire
    return await _runs_by_cron(engine)


@pytest.mark.postgres
async def test_two_servers_fire_each_due_time_once(
    pg: tuple[str, AsyncEngine], tmp_path: Path
) -> None:
    url, engine = pg
    n = 40
    with (
        serve(url, tmp_path, workers=2, env=FAST, name="a") as a,
        serve(url, tmp_path, workers=2, env=FAST, name="b"),
    ):
        client = get_client(url=a.url)
        ids = [
            (
                await client.crons.create(
                    "steps",
                    schedule=YEARLY,
                    input={"tag": f"t{i}"},
                    on_run_completed="keep",
                )
            )["cron_id"]
            for i in range(n)
        ]
        for firing in (1, 2):  # two due times, each made due now for both servers at once
            await _backdate_all(engine)
            got = await _settle(engine, n * firing)
            assert sorted(got) == sorted(ids)
            assert set(got.values()) == {firing}, got


_CLAIM_AND_HANG = """
import asyncio, sys
from app.crons import queries as q
from app.db.engine import create_engine
from app.db.types import utcnow

async def main():
    engine = create_engine(sys.argv[1])
    async with engine.begin() as conn:
        now = utcnow()
        rows = (await conn.execute(q.claim_due("postgresql", now=now, limit=100))).all()
        moves = [  # the scheduler's claim: locked and advanced, run not yet written
            {"b_cron_id": r.cron_id, "b_next_run_date": None, "b_status": "active",
             "b_enabled": True, "b_last_error": None}
            for r in rows
        ]
        await q.advance_many(conn, moves, now=now)
        print("claimed", len(rows), flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.postgres
async def test_killed_after_claim_fires_once_after_restart(
    pg: tuple[str, AsyncEngine], tmp_path: Path
) -> None:
    url, engine = pg
    with serve(url, tmp_path, workers=0, name="api") as api:  # API only: no scheduler
        client = get_client(url=api.url)
        ids = [
            (await client.crons.create("steps", schedule=YEARLY, on_run_completed="keep"))[
                "cron_id"
            ]
            for _ in range(5)
        ]
    await _backdate_all(engine)
    hung = subprocess.Popen(
        [sys.executable, "-c", _CLAIM_AND_HANG, url], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert hung.stdout is not None
        assert hung.stdout.readline().split() == [b"claimed", b"5"]
        hung.kill()  # kill -9 between the claim and the run's creation
        hung.wait(10)
    finally:
        if hung.poll() is None:
            hung.kill()
    assert await _runs_by_cron(engine) == {}
    with serve(url, tmp_path, workers=2, env=FAST, name="after"):
        got = await _settle(engine, len(ids))
    assert got == dict.fromkeys(ids, 1)


async def test_graphkeep_client_crons(live: Live) -> None:
    from graphkeep_client import AsyncClient, Cron, NotFound

    async with AsyncClient(live.url) as client:
        thread = await client.threads.create()
        cron = await client.crons.create_for_thread(
            thread.thread_id, "steps", schedule="15 * * * *", timezone="Asia/Kolkata"
        )
        assert isinstance(cron, Cron) and cron.thread_id == thread.thread_id
        assert cron.next_run_date is not None and cron.next_run_date.minute in (15, 45)
        assert (await client.crons.get(cron.cron_id)).schedule == "15 * * * *"
        stateless = await client.crons.create("steps", schedule="0 0 * * *", metadata={"a": 1})
        assert [c.cron_id for c in await client.crons.search(metadata={"a": 1})] == [
            stateless.cron_id
        ]
        assert await client.crons.count(thread_id=thread.thread_id) == 1
        end = datetime.now(UTC) + timedelta(days=2)
        changed = await client.crons.update(stateless.cron_id, end_time=end, enabled=False)
        assert changed.enabled is False and changed.end_time is not None
        cleared = await client.crons.update(stateless.cron_id, end_time=None)
        assert cleared.end_time is None
        await client.crons.delete(cron.cron_id)
        await client.crons.delete(stateless.cron_id)
        with pytest.raises(NotFound):
            await client.crons.get(cron.cron_id)

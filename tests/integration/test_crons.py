"""Crons through the real app and the real scheduler on both dialects: the API and its bad
inputs, firings made due by backdating next_run_date, the time semantics, thread storage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.crons.scheduler import CronScheduler
from app.db.tables import assistants, crons, runs
from app.db.types import JSONType, utcnow
from app.main import create_app
from tests.conftest import truncate_all

GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "langgraph.json"

YEARLY = "0 0 1 1 *"  # a cron these tests make due by backdating it, never by the clock


@pytest.fixture
async def app_and_client(db_url: str) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    # workers=1 starts the scheduler; the tests tick their own scheduler too (same rows:
    # whichever claims first fires, the other skips: that is the property under test)
    settings = Settings(
        database_url=db_url,
        config_file=GRAPHS,
        workers=1,
        log_level="WARNING",
        cron_poll_seconds=0.1,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as c:
            try:
                yield app, c
            finally:
                await truncate_all(app.state.graphkeep.engine)


def _engine(app: Any) -> AsyncEngine:
    engine: AsyncEngine = app.state.graphkeep.engine
    return engine


async def _backdate(engine: AsyncEngine, cron_id: str, seconds: float) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(crons)
            .where(crons.c.cron_id == cron_id)
            .values(next_run_date=utcnow() - timedelta(seconds=seconds))
        )


async def _cron_runs(engine: AsyncEngine, cron_id: str) -> int:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(runs.c.metadata))).all()
    return sum(1 for (m,) in rows if (m or {}).get("cron_id") == cron_id)


async def _each_fired_once(engine: AsyncEngine, cron_ids: list[str]) -> None:
    """Every cron fired, then (after a pause for a late double firing) exactly once."""
    for cron_id in cron_ids:
        await _wait_runs(engine, cron_id, 1)
    await asyncio.sleep(0.3)
    for cron_id in cron_ids:
        assert await _cron_runs(engine, cron_id) == 1


async def _row(engine: AsyncEngine, cron_id: str) -> Any:
    # without the payload: the poison-row test stores one that does not decrypt
    columns = [c for c in crons.c if c.name != "payload"]
    async with engine.connect() as conn:
        return (await conn.execute(select(*columns).where(crons.c.cron_id == cron_id))).one()


async def _wait_runs(engine: AsyncEngine, cron_id: str, n: int, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while await _cron_runs(engine, cron_id) < n:
        assert asyncio.get_running_loop().time() < deadline, "cron did not fire"
        await asyncio.sleep(0.05)


async def test_crud_search_count_select(app_and_client: Any) -> None:
    _, c = app_and_client
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    r = await c.post(
        "/runs/crons",
        json={
            "assistant_id": "steps",
            "schedule": "0 9 * * 1",
            "timezone": "Europe/Paris",
            "input": {"tag": "x"},
            "metadata": {"team": "a"},
            "user_id": "spoofed",
        },
    )
    assert r.status_code == 200, r.text
    cron = r.json()
    assert cron["thread_id"] is None and cron["on_run_completed"] == "delete"
    assert cron["enabled"] is True and cron["timezone"] == "Europe/Paris"
    assert cron["user_id"] != "spoofed"  # the creator's identity, not the body's
    assert cron["payload"]["input"] == {"tag": "x"}
    nxt = datetime.fromisoformat(cron["next_run_date"])
    assert nxt.weekday() in (0, 6) and nxt > utcnow()  # Monday 09:00 Paris (08:00/07:00 UTC)
    r = await c.post(
        f"/threads/{thread}/runs/crons",
        json={"assistant_id": "steps", "schedule": "*/5 * * * *", "multitask_strategy": "enqueue"},
    )
    assert r.status_code == 200, r.text
    on_thread = r.json()
    assert (
        on_thread["thread_id"] == thread and on_thread["payload"]["multitask_strategy"] == "enqueue"
    )
    got = await c.get(f"/runs/crons/{cron['cron_id']}")
    assert got.status_code == 200 and got.json() == cron
    r = await c.post(
        "/runs/crons/search", json={"limit": 1, "sort_by": "created_at", "sort_order": "asc"}
    )
    assert [x["cron_id"] for x in r.json()] == [cron["cron_id"]]
    assert r.headers["x-pagination-next"] == "1"
    r = await c.post(
        "/runs/crons/search", json={"thread_id": thread, "select": ["cron_id", "schedule"]}
    )
    assert r.json() == [{"cron_id": on_thread["cron_id"], "schedule": "*/5 * * * *"}]
    r = await c.post("/runs/crons/search", json={"metadata": {"team": "a"}})
    assert [x["cron_id"] for x in r.json()] == [cron["cron_id"]]
    assert (await c.post("/runs/crons/search", json={"select": ["nope"]})).status_code == 422
    assert (await c.post("/runs/crons/count", json={})).json() == 2
    assert (await c.post("/runs/crons/count", json={"thread_id": thread})).json() == 1
    # PATCH: a new schedule recomputes next_run_date; end_time null clears it
    end = (utcnow() + timedelta(days=30)).isoformat()
    r = await c.patch(
        f"/runs/crons/{cron['cron_id']}", json={"schedule": "30 * * * *", "end_time": end}
    )
    assert r.status_code == 200, r.text
    patched = r.json()
    assert datetime.fromisoformat(patched["next_run_date"]).minute in (0, 30)  # Paris: :30 local
    assert patched["end_time"] is not None and patched["payload"]["input"] == {"tag": "x"}
    r = await c.patch(f"/runs/crons/{cron['cron_id']}", json={"end_time": None})
    assert r.json()["end_time"] is None
    assert (await c.patch(f"/runs/crons/{cron['cron_id']}", json={})).status_code == 400
    assert (await c.delete(f"/runs/crons/{cron['cron_id']}")).status_code == 204
    assert (await c.get(f"/runs/crons/{cron['cron_id']}")).status_code == 404
    assert (await c.delete(f"/runs/crons/{cron['cron_id']}")).status_code == 404
    info = (await c.get("/info")).json()
    assert info["flags"]["crons"] is True


async def test_bad_inputs_write_nothing(app_and_client: Any) -> None:
    _, c = app_and_client
    past = (utcnow() - timedelta(minutes=1)).isoformat()
    soon = (utcnow() + timedelta(minutes=1)).isoformat()
    missing = "00000000-0000-4000-8000-000000000001"
    cases = [
        ("/runs/crons", {"assistant_id": "steps", "schedule": "every day"}, 422),
        ("/runs/crons", {"assistant_id": "steps", "schedule": "*/5 * * * * *"}, 422),
        ("/runs/crons", {"assistant_id": "steps", "schedule": "0 0 30 2 *"}, 422),
        ("/runs/crons", {"assistant_id": "steps", "schedule": "61 * * * *"}, 422),
        (
            "/runs/crons",
            {"assistant_id": "steps", "schedule": "* * * * *", "timezone": "Mars/X"},
            422,
        ),
        ("/runs/crons", {"assistant_id": "steps", "schedule": "* * * * *", "end_time": past}, 422),
        # never fires before its end: next January 1st is after `soon`
        ("/runs/crons", {"assistant_id": "steps", "schedule": "0 0 1 1 *", "end_time": soon}, 422),
        ("/runs/crons", {"assistant_id": "nope", "schedule": "* * * * *"}, 404),
        ("/runs/crons", {"assistant_id": missing, "schedule": "* * * * *"}, 404),
        ("/runs/crons", {"schedule": "* * * * *"}, 422),
        (
            "/runs/crons",
            {"assistant_id": "steps", "schedule": "* * * * *", "stream_mode": "bogus"},
            422,
        ),
        (
            f"/threads/{missing}/runs/crons",
            {"assistant_id": "steps", "schedule": "*/5 * * * *"},
            404,
        ),
        (
            "/threads/not-a-uuid/runs/crons",
            {"assistant_id": "steps", "schedule": "*/5 * * * *"},
            422,
        ),
    ]
    for path, body, status in cases:
        r = await c.post(path, json=body)
        assert r.status_code == status, (body, r.status_code, r.text)
        assert "detail" in r.json()
    assert (await c.post("/runs/crons/count", json={})).json() == 0
    assert (await c.get("/runs/crons/not-a-uuid")).status_code == 422
    assert (await c.get(f"/runs/crons/{missing}")).status_code == 404
    assert (await c.post("/runs/crons/search", json={"limit": 0})).status_code == 422
    assert (await c.post("/runs/crons/search", json={"sort_order": "up"})).status_code == 422


async def test_missed_slots_fire_once_then_next_slot(app_and_client: Any) -> None:
    app, c = app_and_client
    engine = _engine(app)
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    hourly = f"{(utcnow().minute + 30) % 60} * * * *"
    cron = (
        await c.post(
            f"/threads/{thread}/runs/crons",
            # hourly, its next slot half an hour away: no later slot falls due during the test
            json={"assistant_id": "steps", "schedule": hourly, "input": {"tag": "m"}},
        )
    ).json()
    await _backdate(engine, cron["cron_id"], 5 * 3600)  # five hours down: 5 slots missed
    await _wait_runs(engine, cron["cron_id"], 1)
    await asyncio.sleep(0.5)  # more ticks of the app's scheduler
    assert await _cron_runs(engine, cron["cron_id"]) == 1
    row = await _row(engine, cron["cron_id"])
    assert row.next_run_date > utcnow() and row.status == "active"
    listed = (await c.get(f"/threads/{thread}/runs")).json()
    assert len(listed) == 1 and listed[0]["metadata"]["cron_id"] == cron["cron_id"]


async def test_stateless_cron_new_thread_per_firing(app_and_client: Any) -> None:
    app, c = app_and_client
    engine = _engine(app)
    cron = (
        await c.post(
            "/runs/crons",
            json={
                "assistant_id": "steps",
                "schedule": YEARLY,  # due only when backdated: exactly two firings
                "input": {"tag": "s"},
                "on_run_completed": "keep",
            },
        )
    ).json()
    threads_before = (await c.post("/threads/count", json={})).json()
    await _backdate(engine, cron["cron_id"], 5)
    await _wait_runs(engine, cron["cron_id"], 1)
    await _backdate(engine, cron["cron_id"], 5)
    await _wait_runs(engine, cron["cron_id"], 2)
    async with engine.connect() as conn:
        tids = {
            t
            for (t, m) in (await conn.execute(select(runs.c.thread_id, runs.c.metadata))).all()
            if m.get("cron_id") == cron["cron_id"]
        }
    assert len(tids) == 2  # a thread per firing, kept (on_run_completed=keep)
    assert (await c.post("/threads/count", json={})).json() == threads_before + 2


async def test_two_schedulers_race_fire_each_once(app_and_client: Any, db_url: str) -> None:
    app, c = app_and_client
    engine = _engine(app)
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    ids = []
    for _ in range(20):
        # kept: a deleted temporary thread takes its run row with it (nothing left to count).
        # A yearly slot: fired at hh:mm:59.9, an every-minute cron is rightly due again a
        # moment later (the app's own scheduler fires it), which is no double firing
        body = {"assistant_id": "steps", "schedule": YEARLY, "on_run_completed": "keep"}
        r = await c.post("/runs/crons", json=body)
        ids.append(r.json()["cron_id"])
    r = await c.post(
        f"/threads/{thread}/runs/crons", json={"assistant_id": "steps", "schedule": YEARLY}
    )
    ids.append(r.json()["cron_id"])
    state = app.state.graphkeep
    # a second scheduler on its own engine (own connections), racing the app's own
    from app.db.engine import create_engine

    other_engine = create_engine(db_url)
    try:
        other = CronScheduler(engine=other_engine, runs=state.runs, batch_size=5)
        mine = CronScheduler(engine=engine, runs=state.runs, batch_size=5)
        async with engine.begin() as conn:
            await conn.execute(update(crons).values(next_run_date=utcnow() - timedelta(seconds=2)))
        await asyncio.gather(*(s.tick() for s in (other, mine, other, mine, other, mine)))
        await _each_fired_once(engine, ids)
    finally:
        await other_engine.dispose()


class _Counting(CronScheduler):
    """The real scheduler, counting how many of its ticks overlap."""

    in_flight: int = 0
    most: int = 0

    async def tick(self) -> int:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            return await super().tick()
        finally:
            self.in_flight -= 1


async def test_concurrent_ticks_of_a_backlog_fire_each_once(
    app_and_client: Any, db_url: str
) -> None:
    """While a backlog lasts, one process ticks `concurrency` disjoint batches at once on
    PostgreSQL (SKIP LOCKED), one at a time on SQLite; each due time still fires once."""
    app, c = app_and_client
    engine = _engine(app)
    ids = []
    for _ in range(30):
        # a yearly slot: once fired, the next due time is months away. Every minute, a slow
        # backlog could cross the next minute of the scheduler's clock and rightly fire again
        body = {"assistant_id": "steps", "schedule": YEARLY, "on_run_completed": "keep"}
        ids.append((await c.post("/runs/crons", json=body)).json()["cron_id"])
    state = app.state.graphkeep
    # due an hour from now: only this scheduler, whose clock is an hour ahead, sees them due
    # (the app's own would otherwise claim all 30 in one tick and leave no backlog here)
    ahead = timedelta(hours=1)
    scheduler = _Counting(
        engine=engine,
        runs=state.runs,
        batch_size=3,
        concurrency=3,
        clock=lambda: utcnow() + ahead,
    )
    async with engine.begin() as conn:
        await conn.execute(
            update(crons).values(next_run_date=utcnow() + ahead - timedelta(seconds=2))
        )
    task = asyncio.ensure_future(scheduler.run_forever())
    try:
        await _each_fired_once(engine, ids)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    if "postgresql" in db_url:
        assert scheduler.most > 1  # the backlog was worked by overlapping ticks
    else:
        assert scheduler.most == 1


async def test_disable_reenable_skips_missed_slots(app_and_client: Any) -> None:
    app, c = app_and_client
    engine = _engine(app)
    # the test takes about a second; started in a minute's last seconds, the re-enabled
    # cron's next slot would come (and rightly fire) before its checks
    if (second := utcnow().second) >= 57:
        await asyncio.sleep(61 - second)
    cron = (
        await c.post(
            "/runs/crons", json={"assistant_id": "steps", "schedule": "* * * * *", "enabled": False}
        )
    ).json()
    await _backdate(engine, cron["cron_id"], 600)
    await asyncio.sleep(0.4)
    assert await _cron_runs(engine, cron["cron_id"]) == 0  # disabled: not due
    r = await c.patch(f"/runs/crons/{cron['cron_id']}", json={"enabled": True})
    assert r.status_code == 200
    assert datetime.fromisoformat(r.json()["next_run_date"]) > utcnow()
    await asyncio.sleep(0.4)
    assert await _cron_runs(engine, cron["cron_id"]) == 0  # the skipped slots do not fire


async def test_deleted_thread_and_end_time_stop_the_cron(app_and_client: Any) -> None:
    app, c = app_and_client
    engine = _engine(app)
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    on_thread = (
        await c.post(
            f"/threads/{thread}/runs/crons",
            json={"assistant_id": "steps", "schedule": "*/5 * * * *"},
        )
    ).json()
    assert (await c.get(f"/runs/crons/{on_thread['cron_id']}")).status_code == 200
    assert (await c.delete(f"/threads/{thread}")).status_code == 204
    # deleted with its thread, in the delete's transaction (ON DELETE CASCADE, migration 0008)
    assert (await c.get(f"/runs/crons/{on_thread['cron_id']}")).status_code == 404
    async with engine.connect() as conn:
        left = (await conn.execute(select(crons.c.cron_id))).all()
    assert left == []
    assert await _cron_runs(engine, on_thread["cron_id"]) == 0
    # end_time: the scheduler's clock past the end -> the due time fires, nothing after it
    end = utcnow() + timedelta(minutes=3)
    ending = (
        await c.post(
            "/runs/crons",
            json={
                "assistant_id": "steps",
                "schedule": "* * * * *",
                "end_time": end.isoformat(),
                "on_run_completed": "keep",
            },
        )
    ).json()
    state = app.state.graphkeep
    late = CronScheduler(engine=engine, runs=state.runs, clock=lambda: end + timedelta(minutes=1))
    async with engine.begin() as conn:  # due just before the end
        await conn.execute(
            update(crons)
            .where(crons.c.cron_id == ending["cron_id"])
            .values(next_run_date=end - timedelta(seconds=30))
        )
    await late.tick()
    row = await _row(engine, ending["cron_id"])
    assert row.status == "ended" and row.next_run_date is None
    assert await _cron_runs(engine, ending["cron_id"]) == 1


async def test_thread_storage_figures(app_and_client: Any) -> None:
    _, c = app_and_client
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    empty = (await c.get(f"/threads/{thread}/storage")).json()
    assert empty["checkpoints"] == {"count": 0, "bytes": 0} and empty["total_bytes"] == 0
    r = await c.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "steps", "input": {"tag": "st"}}
    )
    assert r.status_code == 200
    got = (await c.get(f"/threads/{thread}/storage")).json()
    assert got["checkpoints"]["count"] >= 3 and got["checkpoints"]["bytes"] > 0
    assert got["channel_values"]["count"] > 0 and got["channel_values"]["channels"]
    assert got["total_bytes"] == sum(
        got[k]["bytes"] for k in ("checkpoints", "channel_values", "writes", "events")
    )
    missing = "00000000-0000-4000-8000-000000000001"
    assert (await c.get(f"/threads/{missing}/storage")).status_code == 404
    assert (await c.get("/threads/nope/storage")).status_code == 422


async def test_deleted_assistant_stops_and_busy_reject_skips(app_and_client: Any) -> None:
    app, c = app_and_client
    engine = _engine(app)
    assistant = (await c.post("/assistants", json={"graph_id": "steps"})).json()
    cron = (
        await c.post(
            "/runs/crons", json={"assistant_id": assistant["assistant_id"], "schedule": "* * * * *"}
        )
    ).json()
    assert (await c.delete(f"/assistants/{assistant['assistant_id']}")).status_code == 204
    # deleted with its assistant (ON DELETE CASCADE, migration 0008), nothing left to fire
    assert (await c.get(f"/runs/crons/{cron['cron_id']}")).status_code == 404
    assert (await c.post("/runs/crons/count", json={})).json() == 0
    state = app.state.graphkeep
    ticker = CronScheduler(engine=engine, runs=state.runs)
    # multitask_strategy=reject on a busy thread: that due time is skipped, the cron goes on
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    busy = {"assistant_id": "steps", "input": {"tag": "b", "sleep": 1.5}}
    assert (await c.post(f"/threads/{thread}/runs", json=busy)).status_code == 200
    rejecting = (
        await c.post(
            f"/threads/{thread}/runs/crons",
            json={"assistant_id": "steps", "schedule": "* * * * *", "multitask_strategy": "reject"},
        )
    ).json()
    await _backdate(engine, rejecting["cron_id"], 1)
    await ticker.tick()
    # (the app's scheduler may hold the row in its own tick: SKIP LOCKED, then it commits)
    deadline = asyncio.get_running_loop().time() + 10
    while (row := await _row(engine, rejecting["cron_id"])).next_run_date <= utcnow():
        assert asyncio.get_running_loop().time() < deadline, "the due time was not handled"
        await asyncio.sleep(0.05)
    assert row.status == "active" and row.last_error is None
    assert await _cron_runs(engine, rejecting["cron_id"]) == 0


def _failed_firings() -> float:
    from app.metrics import REGISTRY

    value = REGISTRY.get_sample_value("graphkeep_cron_firings_total", {"outcome": "failed"})
    return value or 0.0


async def test_poison_rows_fail_alone_in_their_batch(app_and_client: Any) -> None:
    """One batch: a good cron, one whose payload is no valid run, one whose payload does not
    decrypt, one whose assistant's graph is not registered. The good ones fire in that same
    tick; each poison row keeps its next slot, says why in last_error, and is counted."""
    app, c = app_and_client
    engine = _engine(app)
    body = {"assistant_id": "steps", "schedule": "* * * * *", "on_run_completed": "keep"}
    good = [(await c.post("/runs/crons", json=body)).json()["cron_id"] for _ in range(2)]
    assistant = (await c.post("/assistants", json={"graph_id": "steps"})).json()["assistant_id"]
    made = [
        (await c.post("/runs/crons", json={**body, "assistant_id": a})).json()["cron_id"]
        for a in ("steps", "steps", assistant)
    ]
    bad_payload, no_decrypt, no_graph = made
    async with engine.begin() as conn:
        await conn.execute(  # written behind the API's checks, as a stale row would be
            update(crons)
            .where(crons.c.cron_id == bad_payload)
            .values(payload={"config": {"configurable": 5}})
        )
        await conn.execute(
            update(crons)
            .where(crons.c.cron_id == no_decrypt)
            .values(payload=type_coerce("gk1:rotated-away:AAAA", JSONType))
        )
        await conn.execute(
            update(assistants)
            .where(assistants.c.assistant_id == assistant)
            .values(graph_id="graph_not_deployed")
        )
    failed_before = _failed_firings()
    due = utcnow() - timedelta(seconds=1)
    async with engine.begin() as conn:
        await conn.execute(
            update(crons).where(crons.c.cron_id.in_(good + made)).values(next_run_date=due)
        )
    ticker = CronScheduler(engine=engine, runs=app.state.graphkeep.runs)
    await ticker.tick()  # (the app's own scheduler may take the batch first: same outcome)
    for cron_id in good:
        await _wait_runs(engine, cron_id, 1)
    reasons = {
        bad_payload: "payload is not a valid run",
        no_decrypt: "payload does not decrypt",
        no_graph: "graph 'graph_not_deployed' is not registered",
    }
    for cron_id, reason in reasons.items():
        row = await _row(engine, cron_id)
        assert await _cron_runs(engine, cron_id) == 0
        assert row.last_error is not None and reason in row.last_error, row.last_error
        assert row.enabled is True and row.status == "active" and row.next_run_date > utcnow()
    for cron_id in good:
        assert (await _row(engine, cron_id)).last_error is None
    assert _failed_firings() - failed_before == 3
    # the bad payload fixed: its next firing succeeds and clears the error
    async with engine.begin() as conn:
        await conn.execute(
            update(crons)
            .where(crons.c.cron_id == bad_payload)
            .values(payload={"input": {"tag": "fixed"}}, next_run_date=due)
        )
    await ticker.tick()
    await _wait_runs(engine, bad_payload, 1)
    assert (await _row(engine, bad_payload)).last_error is None

"""The run engine in-process (create_app + ASGI transport) on both dialects: keep-alives,
run time limit, bounded attempts, event retention."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import run_events, runs
from app.db.types import utcnow


async def _thread(client: httpx.AsyncClient) -> str:
    return str((await client.post("/threads", json={})).json()["thread_id"])


async def test_wait_and_sse_send_keepalives(make_client: Any) -> None:
    client = await make_client(stream_keepalive_seconds=0.2)
    tid = await _thread(client)
    body = {"assistant_id": "steps", "input": {"tag": "k", "sleep": 0.9}}
    r = await client.post(f"/threads/{tid}/runs/wait", json=body)
    assert r.status_code == 200
    assert r.text.startswith("\n")  # keep-alive newlines before the JSON
    assert r.json()["trail"] == ["a", "b", "c"]
    r = await client.post(f"/threads/{tid}/runs/stream", json=body)
    assert ": heartbeat\r\n\r\n" in r.text
    assert r.text.startswith("event: metadata\r\n")


async def test_run_time_limit_gives_timeout(make_client: Any) -> None:
    client = await make_client(run_timeout_seconds=0.5)
    tid = await _thread(client)
    r = await client.post(
        f"/threads/{tid}/runs/stream",
        json={"assistant_id": "steps", "input": {"tag": "t", "sleep": 3}},
    )
    assert "event: error\r\n" in r.text
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    run = (await client.get(f"/threads/{tid}/runs/{run_id}")).json()
    assert run["status"] == "timeout"
    thread = (await client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "error"


async def test_attempts_are_bounded(make_client: Any, engine: AsyncEngine) -> None:
    client = await make_client(max_attempts=2)
    tid = await _thread(client)
    run = (
        await client.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "steps", "input": {"tag": "m"}, "after_seconds": 3600},
        )
    ).json()
    # As if two workers had died with it: the next claim is its third attempt.
    async with engine.begin() as conn:
        await conn.execute(
            runs.update()
            .where(runs.c.run_id == run["run_id"])
            .values(attempt=2, available_at=utcnow() - timedelta(seconds=1))
        )
    out = (await client.get(f"/threads/{tid}/runs/{run['run_id']}/join")).json()
    assert out["__error__"]["error"] == "RunAttemptsExceeded"
    assert (await client.get(f"/threads/{tid}/runs/{run['run_id']}")).json()["status"] == "error"


async def test_stream_events_expire_after_retention(make_client: Any, engine: AsyncEngine) -> None:
    client = await make_client(stream_event_retention_seconds=0, sweep_interval_seconds=0.1)
    tid = await _thread(client)
    r = await client.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "echo", "input": {}})
    run_id = r.headers["content-location"].rsplit("/", 1)[1]
    for _ in range(100):
        async with engine.connect() as conn:
            left = (
                await conn.execute(select(func.count()).where(run_events.c.run_id == run_id))
            ).scalar()
        if left == 0:
            break
        await asyncio.sleep(0.1)
    assert left == 0

"""Retention sweepers on both dialects, with a controlled clock.

Thread TTL (delete and keep_latest, per thread and langgraph.json's default), DeltaChannel
safety of keep_latest, busy threads left alone, stream-event expiry and Store TTL sweeps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, StateGraph
from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.config import Settings
from app.db.tables import checkpoints, run_events, runs, threads
from app.db.types import utcnow
from app.errors import InvalidInput
from app.main import create_app
from app.ops.retention import (
    Sweepers,
    ThreadTTLPolicy,
    build_sweepers,
    parse_checkpointer_ttl,
    sweep_threads,
)
from app.store import SQLStore

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=utcnow().tzinfo)


def extend(state: list[Any] | None, writes: list[Any]) -> list[Any]:
    out = list(state or [])
    for write in writes:
        out.extend(write if isinstance(write, list) else [write])
    return out


class Chat(TypedDict):
    messages: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=4)]


def _graph(saver: SQLSaver) -> Any:
    builder = StateGraph(Chat)
    builder.add_node("echo", lambda s: {"messages": [f"echo {len(s['messages'])}"]})
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=saver)


async def _thread(
    engine: AsyncEngine,
    *,
    tenant: str = "default",
    status: str = "idle",
    updated_at: datetime = T0,
    ttl_minutes: float | None = None,
    strategy: str | None = None,
    expires_at: datetime | None = None,
) -> str:
    thread_id = str(uuid.uuid4())
    async with engine.begin() as conn:
        await conn.execute(
            insert(threads).values(
                thread_id=thread_id,
                tenant_id=tenant,
                status=status,
                metadata={},
                config={},
                values=None,
                interrupts={},
                created_at=updated_at,
                updated_at=updated_at,
                state_updated_at=updated_at,
                ttl_minutes=ttl_minutes,
                ttl_strategy=strategy,
                expires_at=expires_at,
            )
        )
    return thread_id


async def _converse(saver: SQLSaver, thread_id: str, turns: int) -> list[str]:
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    for turn in range(turns):
        await graph.ainvoke({"messages": [f"hi {turn}"]}, config)
    state = await graph.aget_state(config)
    return list(state.values["messages"])


async def _count(engine: AsyncEngine, table: Any, **where: Any) -> int:
    async with engine.connect() as conn:
        query = select(func.count()).select_from(table)
        for column, value in where.items():
            query = query.where(table.c[column] == value)
        return int((await conn.execute(query)).scalar_one())


async def _row(engine: AsyncEngine, thread_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(select(threads).where(threads.c.thread_id == thread_id))).first()


def test_checkpointer_ttl_config_is_validated() -> None:
    policy = parse_checkpointer_ttl(
        {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 10}
    )
    assert policy == ThreadTTLPolicy("keep_latest", 43200.0, 10.0)
    assert parse_checkpointer_ttl(None) == ThreadTTLPolicy()
    for bad in (
        {"strategy": "archive"},
        {"default_ttl": 0},
        {"default_ttl": "60"},
        {"sweep_interval_minutes": -1},
        {"default_ttl": True},
        {"ttl": 5},
    ):
        with pytest.raises(InvalidInput, match=r"checkpointer\.ttl"):
            parse_checkpointer_ttl(bad)


async def test_delete_strategy_removes_expired_threads_with_everything_they_own(
    engine: AsyncEngine,
) -> None:
    saver = SQLSaver(engine)
    expired = await _thread(engine, ttl_minutes=5, strategy="delete", expires_at=T0)
    alive = await _thread(engine, ttl_minutes=5, strategy="delete", expires_at=T0 + timedelta(1))
    other_tenant = await _thread(engine, tenant="acme", ttl_minutes=5, expires_at=T0)
    for thread_id, tenant in ((expired, "default"), (alive, "default"), (other_tenant, "acme")):
        await _converse(saver.for_tenant(tenant), thread_id, 2)
    async with engine.begin() as conn:
        run_id = str(uuid.uuid4())
        await conn.execute(
            insert(runs).values(
                run_id=run_id, tenant_id="default", thread_id=expired,
                assistant_id=str(uuid.uuid4()), graph_id="agent", status="success",
                metadata={}, kwargs={}, multitask_strategy="reject", created_at=T0,
                updated_at=T0, available_at=T0,
            )
        )  # fmt: skip
        await conn.execute(
            insert(run_events).values(
                run_id=run_id, seq=1, thread_id=expired, tenant_id="default", event="values",
                data="{}", created_at=T0, expires_at=None,
            )
        )  # fmt: skip

    done = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=T0 + timedelta(minutes=1))

    assert (done.deleted, done.pruned) == (2, 0)
    assert await _row(engine, expired) is None
    assert await _row(engine, other_tenant) is None
    assert await _row(engine, alive) is not None
    assert await _count(engine, checkpoints, thread_id=expired) == 0
    assert await _count(engine, checkpoints, thread_id=other_tenant) == 0
    assert await _count(engine, checkpoints, thread_id=alive) > 0
    assert await _count(engine, runs, thread_id=expired) == 0
    assert await _count(engine, run_events, thread_id=expired) == 0
    # a second sweep finds nothing more
    again = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=T0 + timedelta(minutes=1))
    assert (again.deleted, again.pruned) == (0, 0)


class _FailingCheckpointDelete:
    """A saver whose checkpoint delete fails after the thread row went in the same
    transaction."""

    def for_tenant(self, tenant_id: str) -> _FailingCheckpointDelete:
        return self

    async def adelete_threads_in(self, conn: Any, thread_ids: Any) -> None:
        raise RuntimeError("checkpoint delete failed")


async def test_delete_strategy_is_one_transaction(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    expired = await _thread(engine, ttl_minutes=5, strategy="delete", expires_at=T0)
    await _converse(saver, expired, 2)
    before = await _count(engine, checkpoints, thread_id=expired)
    with pytest.raises(RuntimeError, match="checkpoint delete failed"):
        await sweep_threads(
            engine, _FailingCheckpointDelete(), ThreadTTLPolicy(), now=T0 + timedelta(minutes=1)
        )
    # rolled back: the thread and every checkpoint are still there, for the next sweep
    assert await _row(engine, expired) is not None
    assert await _count(engine, checkpoints, thread_id=expired) == before > 0
    done = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=T0 + timedelta(minutes=1))
    assert done.deleted == 1 and await _count(engine, checkpoints, thread_id=expired) == 0


async def test_keep_latest_is_delta_channel_safe_and_rearms(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    thread_id = await _thread(engine, ttl_minutes=30, strategy="keep_latest", expires_at=T0)
    expected = await _converse(saver, thread_id, 7)
    assert len(expected) == 14
    before = await _count(engine, checkpoints, thread_id=thread_id)

    now = T0 + timedelta(minutes=1)
    done = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=now)

    assert (done.deleted, done.pruned) == (0, 1)
    after = await _count(engine, checkpoints, thread_id=thread_id)
    assert 1 <= after < before
    # the pruned thread reconstructs its whole DeltaChannel history, and keeps working
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    assert (await graph.aget_state(config)).values["messages"] == expected
    await graph.ainvoke({"messages": ["one more"]}, config)
    assert (await graph.aget_state(config)).values["messages"] == [
        *expected,
        "one more",
        "echo 15",
    ]
    row = await _row(engine, thread_id)
    assert row is not None and row.expires_at == now + timedelta(minutes=30)


async def test_default_ttl_is_stamped_from_last_activity(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    policy = ThreadTTLPolicy(strategy="delete", default_ttl_minutes=60)
    stale = await _thread(engine, updated_at=T0)
    recent = await _thread(engine, updated_at=T0 + timedelta(minutes=50))
    own_ttl = await _thread(
        engine, updated_at=T0, ttl_minutes=600, strategy="delete", expires_at=T0 + timedelta(1)
    )

    done = await sweep_threads(engine, saver, policy, now=T0 + timedelta(minutes=61))

    assert done.stamped == 2
    assert done.deleted == 1
    assert await _row(engine, stale) is None
    recent_row = await _row(engine, recent)
    assert recent_row.expires_at == T0 + timedelta(minutes=110)
    assert (recent_row.ttl_minutes, recent_row.ttl_strategy) == (60, "delete")
    assert (await _row(engine, own_ttl)).ttl_minutes == 600  # its own TTL wins

    later = await sweep_threads(engine, saver, policy, now=T0 + timedelta(minutes=111))
    assert (later.stamped, later.deleted) == (0, 1)
    assert await _row(engine, recent) is None


async def test_busy_threads_are_never_swept(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    busy = await _thread(engine, status="busy", ttl_minutes=1, strategy="delete", expires_at=T0)
    await _converse(saver, busy, 1)

    done = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=T0 + timedelta(hours=1))

    assert done.deleted == 0
    assert await _row(engine, busy) is not None
    assert await _count(engine, checkpoints, thread_id=busy) > 0
    # once its run ends the next sweep removes it
    async with engine.begin() as conn:
        await conn.execute(update(threads).where(threads.c.thread_id == busy).values(status="idle"))
    done = await sweep_threads(engine, saver, ThreadTTLPolicy(), now=T0 + timedelta(hours=1))
    assert done.deleted == 1


async def test_stream_events_and_store_items_expire(engine: AsyncEngine) -> None:
    clock = [T0]
    store = SQLStore(engine, ttl={"default_ttl": 10}, clock=lambda: clock[0])
    await store.aput(("memories", "u1"), "short", {"v": 1})
    await store.aput(("memories", "u1"), "forever", {"v": 2}, ttl=None)
    thread_id = await _thread(engine)
    async with engine.begin() as conn:
        for seq, expires in enumerate((T0, T0 + timedelta(hours=2), None), start=1):
            await conn.execute(
                insert(run_events).values(
                    run_id=str(uuid.uuid4()), seq=seq, thread_id=thread_id, tenant_id="default",
                    event="values", data="{}", created_at=T0, expires_at=expires,
                )
            )  # fmt: skip
    sweepers = Sweepers(
        engine=engine,
        saver=SQLSaver(engine),
        store=store,
        policy=ThreadTTLPolicy(),
        default_interval_seconds=60,
        clock=lambda: clock[0],
    )

    clock[0] = T0 + timedelta(minutes=11)
    assert await sweepers.run_events_once() == 1
    assert await sweepers.store_once() == 1
    assert await _count(engine, run_events, thread_id=thread_id) == 2  # later + never
    assert await store.aget(("memories", "u1"), "forever") is not None
    assert await store.aget(("memories", "u1"), "short") is None
    assert await sweepers.run_events_once() == 0
    assert await sweepers.store_once() == 0


async def test_intervals_come_from_langgraph_json(engine: AsyncEngine) -> None:
    store = SQLStore(engine, ttl={"default_ttl": 10, "sweep_interval_minutes": 3})
    sweepers = build_sweepers(
        engine=engine,
        saver=SQLSaver(engine),
        store=store,
        checkpointer_ttl={"strategy": "keep_latest", "sweep_interval_minutes": 2},
        sweep_interval_seconds=45,
    )
    assert sweepers.thread_interval_seconds == 120
    assert sweepers.store_interval_seconds == 180
    assert sweepers.policy.strategy == "keep_latest"
    defaults = build_sweepers(
        engine=engine,
        saver=SQLSaver(engine),
        store=SQLStore(engine),
        checkpointer_ttl=None,
        sweep_interval_seconds=45,
    )
    assert defaults.thread_interval_seconds == 45
    loops = defaults.loops()
    for coro in loops.values():
        coro.close()  # type: ignore[attr-defined]
    assert set(loops) == {"gk-retention-threads", "gk-retention-run-events", "gk-retention-store"}


async def test_the_server_sweeps_by_itself_per_langgraph_json(
    engine: AsyncEngine, db_url: str, tmp_path: Path
) -> None:
    """The startup step runs the sweepers as owned tasks at langgraph.json's interval."""
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": "app.examples.chat:graph"},
                "checkpointer": {
                    "ttl": {
                        "strategy": "delete",
                        "default_ttl": 60,
                        "sweep_interval_minutes": 0.005,
                    }
                },
            }
        )
    )
    app = create_app(Settings(database_url=db_url, config_file=config, workers=0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            old = (await client.post("/threads", json={})).json()["thread_id"]
            fresh = (await client.post("/threads", json={})).json()["thread_id"]
            async with engine.begin() as conn:  # idle for two hours
                await conn.execute(
                    update(threads)
                    .where(threads.c.thread_id == old)
                    .values(
                        updated_at=utcnow() - timedelta(hours=2),
                        ttl_minutes=None,  # as if not stamped yet (a sweep may have run)
                        ttl_strategy=None,
                        expires_at=None,
                    )
                )
            for _ in range(100):
                if (await client.get(f"/threads/{old}")).status_code == 404:
                    break
                await asyncio.sleep(0.1)
            assert (await client.get(f"/threads/{old}")).status_code == 404
            assert (await client.get(f"/threads/{fresh}")).status_code == 200
            names = {task.get_name() for task in app.state.graphkeep.background}
        assert {"gk-retention-threads", "gk-retention-run-events", "gk-retention-store"} <= names

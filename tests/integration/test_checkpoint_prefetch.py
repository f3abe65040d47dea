"""The saver's prefetch views: a read made ahead (with the caller's guard row in the same
statement) answers the next identical call once; any other call reads the database."""

from __future__ import annotations

from uuid import uuid4

from sqlalchemy import bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.db.tables import threads
from app.db.types import utcnow
from tests.integration.test_checkpoint_delta import count_statements
from tests.integration.test_checkpoint_saver import cfg, put


async def test_prefetched_tuple_is_served_once(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine).for_tenant("t1")
    tid = str(uuid4())
    first = await put(saver, cfg(tid), {"a": 1}, {"a": "1".zfill(32) + ".0"})
    await put(saver, first, {"a": 2}, {"a": "2".zfill(32) + ".0"})
    view, guarded = await saver.aprefetch_tuple(cfg(tid))
    assert guarded == []
    with count_statements(engine) as statements:
        got = await view.aget_tuple(cfg(tid))
    assert statements == []
    assert got is not None and got.checkpoint["channel_values"] == {"a": 2}
    # served once (LangGraph mutates what it gets): the next call reads again
    with count_statements(engine) as statements:
        again = await view.aget_tuple(cfg(tid))
    assert len(statements) == 1
    assert again is not None and again.checkpoint["id"] == got.checkpoint["id"]
    assert again is not got
    # another checkpoint, or the same one for another tenant: a read of its own
    view, _ = await saver.aprefetch_tuple(cfg(tid))
    older = await view.aget_tuple(first)
    assert older is not None and older.checkpoint["channel_values"] == {"a": 1}
    assert await view.for_tenant("t2").aget_tuple(cfg(tid)) is None
    assert (await view.aget_tuple(cfg(tid))) is not None


async def test_prefetched_list_is_served_once_for_the_same_arguments(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    tid = str(uuid4())
    config = cfg(tid)
    for i in range(5):
        config = await put(saver, config, {"a": i}, {"a": f"{i + 1:032}.0"})
    view, guarded = await saver.aprefetch_list(cfg(tid), before=None, limit=3)
    assert guarded is None  # no guard asked
    with count_statements(engine) as statements:
        other = [t async for t in view.alist(cfg(tid), limit=2)]
        page = [t async for t in view.alist(cfg(tid), limit=3)]
    assert len(statements) == 1  # only the limit=2 call read the database
    assert [t.checkpoint["channel_values"]["a"] for t in page] == [4, 3, 2]
    assert [t.checkpoint["channel_values"]["a"] for t in other] == [4, 3]
    with count_statements(engine) as statements:
        assert len([t async for t in view.alist(cfg(tid), limit=3)]) == 3
    assert len(statements) == 1


GUARD = select(threads.c.metadata).where(
    threads.c.tenant_id == bindparam("tenant_id"), threads.c.thread_id == bindparam("thread_id")
)


async def _thread_row(engine: AsyncEngine, tenant_id: str, thread_id: str) -> None:
    now = utcnow()
    row = {
        "thread_id": thread_id,
        "tenant_id": tenant_id,
        "status": "idle",
        "metadata": {"graph_id": "g"},
        "config": {},
        "interrupts": {},
        "created_at": now,
        "updated_at": now,
        "state_updated_at": now,
    }
    async with engine.begin() as conn:
        await conn.execute(insert(threads).values(**row))


async def test_guard_rows_ride_in_the_same_statement(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine).for_tenant("t1")
    tid = str(uuid4())
    await _thread_row(engine, "t1", tid)
    config = cfg(tid)
    for i in range(3):
        config = await put(saver, config, {"a": i}, {"a": f"{i + 1:032}.0"})
    with count_statements(engine) as statements:
        view, guarded = await saver.aprefetch_tuple(cfg(tid), guard=GUARD)
        got = await view.aget_tuple(cfg(tid))
        by_id, guarded_by_id = await saver.aprefetch_tuple(config, guard=GUARD)
        listed, guarded_list = await saver.aprefetch_list(
            cfg(tid), before=None, limit=2, guard=GUARD
        )
        page = [t async for t in listed.alist(cfg(tid), limit=2)]
    assert len(statements) == 3
    assert guarded == guarded_by_id == guarded_list == [{"graph_id": "g"}]
    assert got is not None and got.checkpoint["channel_values"] == {"a": 2}
    assert [t.checkpoint["channel_values"]["a"] for t in page] == [2, 1]
    # another tenant, or no such thread: no guard row (the caller answers 404)
    other, rows = await SQLSaver(engine).for_tenant("t2").aprefetch_tuple(cfg(tid), guard=GUARD)
    assert rows == [] and await other.aget_tuple(cfg(tid)) is None
    _, rows = await saver.aprefetch_list(cfg(str(uuid4())), before=None, limit=5, guard=GUARD)
    assert rows == []
    # a list that is not one statement (limit above a page): the caller reads its own row
    _, rows = await saver.aprefetch_list(cfg(tid), before=None, limit=500, guard=GUARD)
    assert rows is None

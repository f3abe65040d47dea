"""The saver's prefetch views: a read made ahead (overlapping the thread lookup) answers the
next identical call once; any other call reads the database as usual."""

from __future__ import annotations

from uuid import uuid4

from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from tests.integration.test_checkpoint_delta import count_statements
from tests.integration.test_checkpoint_saver import cfg, put


async def test_prefetched_tuple_is_served_once(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine).for_tenant("t1")
    tid = str(uuid4())
    first = await put(saver, cfg(tid), {"a": 1}, {"a": "1".zfill(32) + ".0"})
    await put(saver, first, {"a": 2}, {"a": "2".zfill(32) + ".0"})
    view = await saver.aprefetch_tuple(cfg(tid))
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
    view = await saver.aprefetch_tuple(cfg(tid))
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
    view = await saver.aprefetch_list(cfg(tid), before=None, limit=3)
    with count_statements(engine) as statements:
        other = [t async for t in view.alist(cfg(tid), limit=2)]
        page = [t async for t in view.alist(cfg(tid), limit=3)]
    assert len(statements) == 1  # only the limit=2 call read the database
    assert [t.checkpoint["channel_values"]["a"] for t in page] == [4, 3, 2]
    assert [t.checkpoint["channel_values"]["a"] for t in other] == [4, 3]
    with count_statements(engine) as statements:
        assert len([t async for t in view.alist(cfg(tid), limit=3)]) == 3
    assert len(statements) == 1

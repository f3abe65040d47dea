"""`alist` of one thread with a small limit (history) runs as one statement; it must return
exactly what the general path returns: same checkpoints, order, values and pending writes."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from langgraph.checkpoint.base import CheckpointTuple
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from tests.integration.test_checkpoint_delta import count_statements
from tests.integration.test_checkpoint_saver import cfg, put


def _plain(tup: CheckpointTuple) -> Any:
    return (
        tup.config,
        tup.parent_config,
        tup.metadata,
        tup.checkpoint["id"],
        tup.checkpoint["channel_values"],
        tup.checkpoint["channel_versions"],
        tup.pending_writes,
    )


async def _history(engine: AsyncEngine) -> tuple[SQLSaver, str, list[str]]:
    """A thread of 12 checkpoints with values that change at different steps, pending
    writes on some checkpoints, another namespace and another thread alongside."""
    saver = SQLSaver(engine)
    tid = str(uuid4())
    parent = cfg(tid)
    ids = []
    for i in range(12):
        versions = {"a": f"{i // 3 + 1:032}.0", "b": f"{i + 1:032}.0", "big": "1".zfill(32) + ".0"}
        values = {"a": {"n": i // 3}, "b": [i] * i, "big": "x" * 1000}
        new = {k: v for k, v in versions.items() if i == 0 or k != "big"}
        parent = await put(saver, parent, values, versions, new, step=i)
        ids.append(parent["configurable"]["checkpoint_id"])
        if i % 4 == 0:
            await saver.aput_writes(parent, [("a", {"w": i}), ("b", [i])], f"task-{i}")
            await saver.aput_writes(parent, [("c", "second")], f"task-{i}-2")
    await put(saver, cfg(tid, ns="child:1"), {"a": 1}, {"a": "1".zfill(32) + ".0"})
    await put(saver, cfg(str(uuid4())), {"a": 2}, {"a": "1".zfill(32) + ".0"})
    return saver, tid, ids[::-1]


async def _general(saver: SQLSaver, tid: str, **kwargs: Any) -> list[Any]:
    # a limit above the page size takes the general (header query, then page query) path
    found = [_plain(t) async for t in saver.alist(cfg(tid), limit=1000, **kwargs)]
    return found


async def test_one_page_list_matches_general_path(engine: AsyncEngine) -> None:
    saver, tid, newest_first = await _history(engine)
    everything = await _general(saver, tid)
    assert [t[3] for t in everything] == newest_first
    for limit in (1, 3, 10, 12, 50):
        page = [_plain(t) async for t in saver.alist(cfg(tid), limit=limit)]
        assert page == everything[:limit], limit
    before = {"configurable": {"checkpoint_id": newest_first[4]}}
    page = [_plain(t) async for t in saver.alist(cfg(tid), limit=5, before=before)]
    assert page == everything[5:10]
    assert [t async for t in saver.alist(cfg(str(uuid4())), limit=5)] == []
    # the other namespace is its own history
    (child,) = [t async for t in saver.alist(cfg(tid, ns="child:1"), limit=10)]
    assert child.checkpoint["channel_values"] == {"a": 1}


async def test_one_page_list_is_one_statement(engine: AsyncEngine) -> None:
    saver, tid, _ = await _history(engine)
    with count_statements(engine) as statements:
        page = [t async for t in saver.alist(cfg(tid), limit=10)]
    assert len(page) == 10
    assert len(statements) == 1, statements

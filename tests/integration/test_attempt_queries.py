"""The settle's state read counts the thread's history in the same statement
(app/runs/attempt_queries.py): the count is the thread's root checkpoints (subgraph ones
not), capped, and the head checkpoint served from that read is the saver's own answer."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.runs.attempt_queries import history_length_guard


def cfg(thread_id: str, ns: str = "") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


async def _put(saver: SQLSaver, config: RunnableConfig, step: int) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = {"n": step}
    checkpoint["channel_versions"] = {"n": str(step)}
    return await saver.aput(config, checkpoint, {"step": step}, {"n": str(step)})


async def test_the_head_read_counts_the_root_history(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine, tenant_id="t1")
    other_tenant = SQLSaver(engine, tenant_id="t2")
    config: Any = cfg("th")
    for step in range(4):
        config = await _put(saver, config, step)
    await _put(saver, cfg("th", "child:1"), 0)  # a subgraph's: not the thread's history
    await _put(other_tenant, cfg("th"), 0)  # another tenant's thread of the same id
    await _put(saver, cfg("other"), 0)
    dialect = engine.dialect.name

    view, guarded = await saver.aprefetch_tuple(cfg("th"), guard=history_length_guard(dialect, 100))
    assert guarded == [4]
    served = await view.aget_tuple(cfg("th"))
    latest = await saver.aget_tuple(cfg("th"))
    assert served is not None and latest is not None
    assert served.config == latest.config == config
    assert served.checkpoint == latest.checkpoint
    # capped: a long history costs no more than the histogram's top bucket needs
    _, capped = await saver.aprefetch_tuple(cfg("th"), guard=history_length_guard(dialect, 3))
    assert capped == [3]
    _, other = await other_tenant.aprefetch_tuple(
        cfg("th"), guard=history_length_guard(dialect, 100)
    )
    assert other == [1]
    # a thread without checkpoints: nothing to serve, a count of 0
    empty_view, none = await saver.aprefetch_tuple(
        cfg("none"), guard=history_length_guard(dialect, 100)
    )
    assert none == [0]
    assert await empty_view.aget_tuple(cfg("none")) is None

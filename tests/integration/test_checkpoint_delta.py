"""DeltaChannel: history in one query, exact reconstruction, and copy / prune / delete safety."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph._internal._typing import MISSING
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph
from sqlalchemy import event, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import DeltaHistoryConflict, SQLSaver, codec, delta_queries
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from app.db.types import utcnow


def extend(state: list[Any], writes: list[Any]) -> list[Any]:
    out = list(state)
    for write in writes:
        out.extend(write if isinstance(write, list) else [write])
    return out


def rebuild(history: Any) -> list[Any]:
    channel = DeltaChannel(extend)
    channel = channel.from_checkpoint(history.get("seed", MISSING))
    channel.replay_writes(history["writes"])
    return list(channel.get())


@contextmanager
def count_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        # SQLite's engine opens every transaction with BEGIN IMMEDIATE: not a query
        if not statement.startswith("BEGIN"):
            seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def put_chain(
    saver: SQLSaver, thread_id: str, steps: int, frequency: int, *, run_id: str | None = None
) -> tuple[RunnableConfig, list[str]]:
    """A DeltaChannel thread through the saver's API, shaped as langgraph writes it: checkpoint
    i holds a `_DeltaSnapshot` every `frequency` steps and nothing otherwise; its writes (m_i)
    build checkpoint i + 1."""
    expected: list[str] = []
    version: str | None = None
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for i in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        new_versions = {}
        if i:
            version = saver.get_next_version(version, None)
            new_versions["messages"] = version
        if version:
            checkpoint["channel_versions"] = {"messages": version}
        if i and i % frequency == 0:
            checkpoint["channel_values"] = {"messages": _DeltaSnapshot(list(expected))}
        metadata: Any = {
            "source": "loop",
            "step": i,
            "parents": {},
            "counters_since_delta_snapshot": {"messages": [i % frequency, i % frequency]},
        }
        if run_id:
            metadata["run_id"] = run_id
        config = await saver.aput(config, checkpoint, metadata, new_versions)
        if i < steps - 1:
            await saver.aput_writes(config, [("messages", [f"m{i}"])], str(uuid4()), "~step")
            expected.append(f"m{i}")
    return config, expected


async def insert_chain(
    engine: AsyncEngine, saver: SQLSaver, thread_id: str, steps: int
) -> tuple[RunnableConfig, list[str]]:
    """The same shape as `put_chain` (no snapshots), inserted in bulk: for deep chains."""
    key = {"tenant_id": saver.tenant_id, "thread_id": thread_id, "checkpoint_ns": ""}
    cps, writes, expected = [], [], []
    parent = None
    for i in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        checkpoint["channel_versions"] = {"messages": f"{i:032}.5"}
        type_tag, body, versions, _ = codec.encode_checkpoint(saver.serde, checkpoint, {})
        cps.append(
            {
                **key,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": parent,
                "run_id": None,
                "type": type_tag,
                "checkpoint": body,
                "metadata": {"step": i, "counters_since_delta_snapshot": {"messages": [i, i]}},
                "value_versions": versions,
                "created_at": utcnow(),
            }
        )
        if i < steps - 1:
            writes += codec.encode_writes(
                saver.serde,
                {**key, "checkpoint_id": checkpoint["id"]},
                [("messages", [f"m{i}"])],
                f"task-{i}",
                "~step",
            )
            expected.append(f"m{i}")
        parent = checkpoint["id"]
    async with engine.begin() as conn:
        await conn.execute(insert(checkpoints), cps)
        await conn.execute(insert(checkpoint_writes), writes)
    return {"configurable": {**key, "checkpoint_id": parent}}, expected


async def history(saver: SQLSaver, config: RunnableConfig) -> list[Any]:
    result = await saver.aget_delta_channel_history(config=config, channels=["messages"])
    return rebuild(result["messages"])


def test_history_statement_has_the_columns_assembly_unpacks() -> None:
    # app/checkpoint/delta.py unpacks the rows by position
    for channels in (1, 3):
        for by_id in (False, True):
            stmt = delta_queries.build_history_query(channels, by_id=by_id)
            assert tuple(stmt.selected_columns.keys()) == delta_queries.HISTORY_COLUMNS


async def test_history_is_one_query_and_matches_the_reference_walk(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config, expected = await put_chain(saver, "t", 130, 50)
    with count_statements(engine) as statements:
        mine = await saver.aget_delta_channel_history(
            config=config, channels=["messages", "absent"]
        )
    assert len(statements) == 1
    reference = await BaseCheckpointSaver.aget_delta_channel_history(
        saver, config=config, channels=["messages", "absent"]
    )
    assert mine == reference
    assert isinstance(mine["messages"]["seed"], _DeltaSnapshot)  # walk stopped at step 100
    assert len(mine["messages"]["writes"]) == 29
    assert rebuild(mine["messages"]) == expected
    assert mine["absent"] == {"writes": []}
    # without a checkpoint id: the latest; an unknown id: nothing
    latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    assert await history(saver, latest) == expected
    unknown: RunnableConfig = {"configurable": {**latest["configurable"], "checkpoint_id": "x"}}
    assert await saver.aget_delta_channel_history(config=unknown, channels=["messages"]) == {
        "messages": {"writes": []}
    }


async def test_five_thousand_deep_chain_in_one_query(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config, expected = await insert_chain(engine, saver, "deep", 5000)
    started = time.perf_counter()
    with count_statements(engine) as statements:
        rebuilt = await history(saver, config)
    elapsed = time.perf_counter() - started
    assert len(statements) == 1
    assert rebuilt == expected and len(rebuilt) == 4999
    assert elapsed < 10, elapsed  # a per-ancestor walk would take minutes here


@pytest.mark.slow
async def test_fifteen_hundred_steps_survive_copy_and_prune(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config, expected = await put_chain(saver, "src", 1500, 100)
    assert await history(saver, config) == expected

    await saver.acopy_thread("src", "dst")
    copied = {"configurable": {"thread_id": "dst", "checkpoint_ns": ""}}
    assert await history(saver, copied) == expected

    await saver.aprune(["src"], strategy="keep_latest")
    assert await history(saver, config) == expected
    source: RunnableConfig = {"configurable": {"thread_id": "src", "checkpoint_ns": ""}}
    kept = [t.checkpoint["id"] async for t in saver.alist(source)]
    # the head (step 1499) and its ancestors back to the step-1400 snapshot
    assert len(kept) == 100
    # pruned blobs are gone: only the snapshot the kept chain seeds from stays
    async with engine.connect() as conn:
        blobs = await conn.scalar(
            select(func.count())
            .select_from(checkpoint_blobs)
            .where(checkpoint_blobs.c.thread_id == "src")
        )
    assert blobs == 1
    # the copy is untouched by the source's prune
    assert len([t async for t in saver.alist(copied)]) == 1500


async def test_delete_for_runs_refuses_to_break_a_live_delta_history(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    first, expected_first = await put_chain(saver, "t", 30, 100, run_id="run-1")
    # run 2 continues the thread from run 1's head without a snapshot
    config = first
    for i in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=100 + i))
        checkpoint["channel_versions"] = {"messages": f"{100 + i:032}.1"}
        metadata: Any = {
            "step": 30 + i,
            "run_id": "run-2",
            "counters_since_delta_snapshot": {"messages": [30 + i, 30 + i]},
        }
        await saver.aput_writes(config, [("messages", [f"r2-{i}"])], f"task-{i}")
        config = await saver.aput(config, checkpoint, metadata, {"messages": f"{100 + i:032}.1"})
    before = await history(saver, config)
    assert before == [*expected_first, "r2-0", "r2-1", "r2-2"][: len(before)]

    with pytest.raises(DeltaHistoryConflict, match="DeltaChannel history"):
        await saver.adelete_for_runs(["run-1"])
    assert await history(saver, config) == before  # nothing was deleted

    # rolling back the newest run is fine, and leaves run 1 intact
    await saver.adelete_for_runs(["run-2"])
    assert await history(saver, first) == expected_first
    # deleting both runs together breaks nothing that survives
    await saver.adelete_for_runs(["run-1", "run-2"])
    assert [t async for t in saver.alist(first)] == []


class MessagesState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(extend, snapshot_frequency=40)]
    i: int


def _loop_graph(saver: SQLSaver, steps: int) -> Any:
    def step(state: MessagesState) -> dict[str, Any]:
        return {"messages": [f"m{state['i']}"], "i": state["i"] + 1}

    def route(state: MessagesState) -> str:
        return "step" if state["i"] < steps else END

    builder = StateGraph(MessagesState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route)
    return builder.compile(checkpointer=saver)


async def test_real_graph_delta_messages_after_copy_and_prune(engine: AsyncEngine) -> None:
    steps = 250
    saver = SQLSaver(engine)
    graph = _loop_graph(saver, steps)
    config: RunnableConfig = {"configurable": {"thread_id": "g"}, "recursion_limit": steps + 10}
    await graph.ainvoke({"messages": [], "i": 0}, config)
    expected = [f"m{i}" for i in range(steps)]
    state = await graph.aget_state(config)
    assert state.values["messages"] == expected
    # the stored latest checkpoint holds no messages value: it really is a delta thread
    latest = await saver.aget_tuple(config)
    assert latest is not None and "messages" not in latest.checkpoint["channel_values"]
    reference = await BaseCheckpointSaver.aget_delta_channel_history(
        saver, config=latest.config, channels=["messages"]
    )
    assert (
        await saver.aget_delta_channel_history(config=latest.config, channels=["messages"])
        == reference
    )

    await saver.acopy_thread("g", "g-copy")
    copy_config: RunnableConfig = {"configurable": {"thread_id": "g-copy"}}
    assert (await graph.aget_state(copy_config)).values["messages"] == expected

    await saver.aprune(["g"], strategy="keep_latest")
    assert (await graph.aget_state(config)).values["messages"] == expected
    assert len([s async for s in graph.aget_state_history(config)]) < steps
    # the pruned thread keeps running correctly
    await graph.aupdate_state(config, {"messages": ["extra"]}, as_node="step")
    assert (await graph.aget_state(config)).values["messages"] == [*expected, "extra"]

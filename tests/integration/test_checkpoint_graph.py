"""Real StateGraphs on SQLSaver: pending writes, interrupts, forks, history, subgraphs,
durability modes."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def cfg(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def chain_graph(saver: SQLSaver, names: str = "abc", seen: dict[str, Any] | None = None) -> Any:
    def make(name: str) -> Any:
        async def node(state: State, config: RunnableConfig) -> dict[str, Any]:
            if seen is not None:
                latest = await saver.aget_tuple(
                    {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
                )
                seen.setdefault(name, latest.metadata["step"] if latest else None)
            return {"log": [name]}

        return node

    builder = StateGraph(State)
    previous = START
    for name in names:
        builder.add_node(name, make(name))
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=saver)


async def test_parallel_failure_resumes_only_the_failed_node(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    calls = {"ok": 0, "flaky": 0, "after": 0}

    ok_done = asyncio.Event()

    async def ok(state: State) -> dict[str, Any]:
        calls["ok"] += 1
        ok_done.set()
        return {"log": ["ok"]}

    async def flaky(state: State) -> dict[str, Any]:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            # fail only once the sibling has finished, so its writes are pending, not lost
            await ok_done.wait()
            await asyncio.sleep(0.05)
            raise RuntimeError("transient failure")
        return {"log": ["flaky"]}

    def after(state: State) -> dict[str, Any]:
        calls["after"] += 1
        return {"log": ["after"]}

    builder = StateGraph(State)
    builder.add_node("ok", ok)
    builder.add_node("flaky", flaky)
    builder.add_node("after", after)
    builder.add_edge(START, "ok")
    builder.add_edge(START, "flaky")
    builder.add_edge(["ok", "flaky"], "after")
    builder.add_edge("after", END)
    graph = builder.compile(checkpointer=saver)

    with pytest.raises(RuntimeError, match="transient failure"):
        await graph.ainvoke({"log": []}, cfg("p"))
    stored = await saver.aget_tuple(cfg("p"))
    assert stored is not None and stored.pending_writes
    # the finished node's writes and the failed node's error are saved as pending writes
    assert any(w[1] == "log" and w[2] == ["ok"] for w in stored.pending_writes)
    assert any(w[1] == "__error__" for w in stored.pending_writes)

    result = await graph.ainvoke(None, cfg("p"))
    assert calls == {"ok": 1, "flaky": 2, "after": 1}
    assert sorted(result["log"][:2]) == ["flaky", "ok"] and result["log"][2] == "after"


async def test_interrupt_then_resume(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)

    def ask(state: State) -> dict[str, Any]:
        answer = interrupt({"question": "name?"})
        return {"log": [f"hello {answer}"]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=saver)

    first = await graph.ainvoke({"log": []}, cfg("i"))
    assert first["__interrupt__"][0].value == {"question": "name?"}
    state = await graph.aget_state(cfg("i"))
    assert state.next == ("ask",) and state.interrupts[0].value == {"question": "name?"}

    done = await graph.ainvoke(Command(resume="ada"), cfg("i"))
    assert done["log"] == ["hello ada"]
    assert (await graph.aget_state(cfg("i"))).next == ()


async def test_update_state_forks_and_keeps_history(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    graph = chain_graph(saver)
    await graph.ainvoke({"log": []}, cfg("f"))
    before = [s async for s in graph.aget_state_history(cfg("f"))]
    after_a = next(s for s in before if s.values.get("log") == ["a"])

    forked = await graph.aupdate_state(after_a.config, {"log": ["edited"]}, as_node="a")
    fork_state = await graph.aget_state(forked)
    assert fork_state.values["log"] == ["a", "edited"]
    assert fork_state.next == ("b",)  # as_node="a": the fork continues after a
    assert fork_state.parent_config is not None
    assert (
        fork_state.parent_config["configurable"]["checkpoint_id"]
        == after_a.config["configurable"]["checkpoint_id"]
    )

    history = [s async for s in graph.aget_state_history(cfg("f"))]
    ids = {s.config["configurable"]["checkpoint_id"] for s in history}
    assert ids >= {s.config["configurable"]["checkpoint_id"] for s in before}
    assert len(history) == len(before) + 1
    # the original branch still answers exactly as before
    original_head = before[0]
    again = await graph.aget_state(original_head.config)
    assert again.values == original_head.values == {"log": ["a", "b", "c"]}

    resumed = await graph.ainvoke(None, forked)
    assert resumed["log"] == ["a", "edited", "b", "c"]


async def test_state_history_order_filter_before_limit(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    graph = chain_graph(saver)
    await graph.ainvoke({"log": []}, cfg("h"))
    history = [s async for s in graph.aget_state_history(cfg("h"))]
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    ids = [s.config["configurable"]["checkpoint_id"] for s in history]
    assert ids == sorted(ids, reverse=True)

    loops = [s async for s in graph.aget_state_history(cfg("h"), filter={"source": "loop"})]
    assert [s.metadata["step"] for s in loops] == [3, 2, 1, 0]
    step_two = [s async for s in graph.aget_state_history(cfg("h"), filter={"step": 2})]
    assert [s.values["log"] for s in step_two] == [["a", "b"]]

    older = [s async for s in graph.aget_state_history(cfg("h"), before=history[1].config)]
    assert [s.metadata["step"] for s in older] == [1, 0, -1]
    limited = [
        s async for s in graph.aget_state_history(cfg("h"), before=history[1].config, limit=2)
    ]
    assert [s.metadata["step"] for s in limited] == [1, 0]
    assert [s async for s in graph.aget_state_history(cfg("h"), filter={"step": 99})] == []


async def test_subgraph_checkpoints_live_in_their_namespace(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)

    def inner_ask(state: State) -> dict[str, Any]:
        return {"log": [f"inner {interrupt('ok?')}"]}

    inner = StateGraph(State)
    inner.add_node("inner_ask", inner_ask)
    inner.add_edge(START, "inner_ask")
    inner.add_edge("inner_ask", END)

    outer = StateGraph(State)
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "child")
    outer.add_edge("child", END)
    graph = outer.compile(checkpointer=saver)

    await graph.ainvoke({"log": []}, cfg("s"))
    state = await graph.aget_state(cfg("s"), subgraphs=True)
    child_state = state.tasks[0].state
    assert child_state is not None and not isinstance(child_state, dict)
    child_ns = child_state.config["configurable"]["checkpoint_ns"]
    assert child_ns.startswith("child:")
    assert child_state.next == ("inner_ask",)

    stored = [
        t
        async for t in saver.alist({"configurable": {"thread_id": "s", "checkpoint_ns": child_ns}})
    ]
    assert stored and all(t.config["configurable"]["checkpoint_ns"] == child_ns for t in stored)
    root = [t async for t in saver.alist({"configurable": {"thread_id": "s", "checkpoint_ns": ""}})]
    assert root and all(t.config["configurable"]["checkpoint_ns"] == "" for t in root)

    done = await graph.ainvoke(Command(resume="yes"), cfg("s"))
    assert done["log"] == ["inner yes"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_durability_modes(engine: AsyncEngine, durability: str) -> None:
    saver = SQLSaver(engine)
    seen: dict[str, Any] = {}
    graph = chain_graph(saver, seen=seen)
    await graph.ainvoke({"log": []}, cfg(durability), durability=durability)  # type: ignore[arg-type]
    history = [s async for s in graph.aget_state_history(cfg(durability))]
    final = await graph.aget_state(cfg(durability))
    assert final.values == {"log": ["a", "b", "c"]} and final.next == ()
    if durability == "exit":
        # persisted only when the run exits: nothing while it runs, then the final state
        assert seen == {"a": None, "b": None, "c": None}
        assert [s.metadata["step"] for s in history] == [3]
    else:
        # every super-step is persisted
        assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    if durability == "sync":
        # saved before the next step starts: each node sees the previous step's checkpoint
        assert seen == {"a": 0, "b": 1, "c": 2}

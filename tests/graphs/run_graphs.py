"""Test graphs that record every node execution, so "not re-run" is provable.

Each node appends `<tag>:<node>@<pid>` to the file named by GK_TEST_RECORD_FILE (when set). Nodes
of `steps` sleep for `state["sleep"]` seconds in `b`, which gives tests a window to kill or
cancel a run between super-steps.
"""

from __future__ import annotations

import asyncio
import operator
import os
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt


def record(tag: str, node: str) -> None:
    path = os.environ.get("GK_TEST_RECORD_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{tag}:{node}@{os.getpid()}\n")
            fh.flush()
            os.fsync(fh.fileno())


class StepsState(TypedDict, total=False):
    tag: str
    sleep: float
    trail: Annotated[list[str], operator.add]


def _node(name: str, *, sleeps: bool = False) -> Any:
    async def run(state: StepsState) -> dict[str, Any]:
        if sleeps and state.get("sleep"):
            await asyncio.sleep(float(state["sleep"]))
        record(state.get("tag", ""), name)
        return {"trail": [name]}

    run.__name__ = name
    return run


_steps = StateGraph(StepsState)
_steps.add_node("a", _node("a"))
_steps.add_node("b", _node("b", sleeps=True))
_steps.add_node("c", _node("c"))
_steps.add_edge(START, "a")
_steps.add_edge("a", "b")
_steps.add_edge("b", "c")
_steps.add_edge("c", END)
steps = _steps.compile(name="steps")


class AskState(TypedDict, total=False):
    tag: str
    question: str
    answer: str


def _ask(state: AskState) -> dict[str, Any]:
    answer = interrupt({"question": state.get("question", "ok?")})
    record(state.get("tag", ""), "ask")
    return {"answer": answer}


def _after(state: AskState) -> dict[str, Any]:
    record(state.get("tag", ""), "after")
    return {"answer": f"{state['answer']}!"}


_asker = StateGraph(AskState)
_asker.add_node("ask", _ask)
_asker.add_node("after", _after)
_asker.add_edge(START, "ask")
_asker.add_edge("ask", "after")
_asker.add_edge("after", END)
asker = _asker.compile(name="asker")


class FailState(TypedDict, total=False):
    tag: str


def _explode(state: FailState) -> dict[str, Any]:
    raise ValueError("boom: " + state.get("tag", ""))


_failing = StateGraph(FailState)
_failing.add_node("explode", _explode)
_failing.add_edge(START, "explode")
failing = _failing.compile(name="failing")


class WriterState(TypedDict, total=False):
    count: int
    total: int


def _write(state: WriterState) -> dict[str, Any]:
    writer = get_stream_writer()
    for i in range(int(state.get("count", 3))):
        writer({"i": i})
    return {"total": int(state.get("count", 3))}


_writer = StateGraph(WriterState)
_writer.add_node("write", _write)
_writer.add_edge(START, "write")
writer = _writer.compile(name="writer")


class NestState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


async def _child_step(state: NestState) -> dict[str, Any]:
    # A pause, so a client that opens a subscription of its own on discovering the subgraph
    # (the JS useStream's subgraph card, opened at the child's first `values`) has it open
    # before the child's last events and the run's end. Without it, on a loaded machine, the
    # hook's lifecycle watcher could report the end before the card's own stream replayed
    # the child's values (all of them sent: its wire showed them), and the card never
    # re-rendered with them (tests/e2e/test_js_use_stream.py).
    await asyncio.sleep(0.5)
    return {"items": ["child"]}


_child = StateGraph(NestState)
_child.add_node("child_step", _child_step)
_child.add_edge(START, "child_step")
_child_graph = _child.compile()


def _parent_step(state: NestState) -> dict[str, Any]:
    return {"items": ["parent"]}


_nested = StateGraph(NestState)
_nested.add_node("parent_step", _parent_step)
_nested.add_node("child", _child_graph)
_nested.add_edge(START, "parent_step")
_nested.add_edge("parent_step", "child")
nested = _nested.compile(name="nested")


async def _reply(state: MessagesState) -> dict[str, Any]:
    text = str(state["messages"][-1].content) if state["messages"] else ""
    model = GenericFakeChatModel(messages=iter([AIMessage(content=f"echo {text}")]))
    message = await model.ainvoke(state["messages"])
    return {"messages": [message]}


_chat = StateGraph(MessagesState)
_chat.add_node("reply", _reply)
_chat.add_edge(START, "reply")
chat = _chat.compile(name="chat")


class EchoState(TypedDict, total=False):
    text: str


def _echo(state: EchoState) -> dict[str, Any]:
    return {"text": state.get("text", "")}


_echo_builder = StateGraph(EchoState)
_echo_builder.add_node("echo", _echo)
_echo_builder.add_edge(START, "echo")
echo = _echo_builder.compile(name="echo")


class SeenState(TypedDict, total=False):
    seen: dict[str, Any]


def _introspect(state: SeenState, config: RunnableConfig, runtime: Runtime[Any]) -> dict[str, Any]:
    configurable = config.get("configurable", {})
    keys = (
        "x-user-id",
        "user-agent",
        "x-api-key",
        "authorization",
        "langgraph_auth_user_id",
        "tenant_id",
        "run_id",
        "assistant_id",
        "graph_id",
        "mine",
    )
    seen = {k: configurable.get(k) for k in keys}
    seen["context"] = runtime.context
    seen["tags"] = config.get("tags")
    return {"seen": seen}


_introspect_builder = StateGraph(SeenState)
_introspect_builder.add_node("introspect", _introspect)
_introspect_builder.add_edge(START, "introspect")
introspect = _introspect_builder.compile(name="introspect")


class GotoState(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]


def _goto_node(name: str) -> Any:
    def run(state: GotoState) -> dict[str, Any]:
        return {"trail": [name]}

    return run


_goto_builder = StateGraph(GotoState)
_goto_builder.add_node("first", _goto_node("first"))
_goto_builder.add_node("second", _goto_node("second"))
_goto_builder.add_edge(START, "first")
jumps = _goto_builder.compile(name="jumps")


class FanState(TypedDict, total=False):
    tag: str
    sleep: float
    done: Annotated[list[str], operator.add]


async def _fast(state: FanState) -> dict[str, Any]:
    record(state.get("tag", ""), "fast")
    return {"done": ["fast"]}


async def _slow(state: FanState) -> dict[str, Any]:
    await asyncio.sleep(float(state.get("sleep", 0)))
    record(state.get("tag", ""), "slow")
    return {"done": ["slow"]}


async def _join(state: FanState) -> dict[str, Any]:
    record(state.get("tag", ""), "join")
    return {"done": ["join"]}


_fan = StateGraph(FanState)
_fan.add_node("fast", _fast)
_fan.add_node("slow", _slow)
_fan.add_node("join", _join)
_fan.add_edge(START, "fast")
_fan.add_edge(START, "slow")
_fan.add_edge(["fast", "slow"], "join")
fan = _fan.compile(name="fan")


class MemoryState(TypedDict, total=False):
    key: str
    text: str
    count: int


async def _remember(state: MemoryState, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
    assert runtime.store is not None
    user = config["configurable"]["langgraph_auth_user_id"]
    await runtime.store.aput(("memories", user), state["key"], {"text": state.get("text", "")})
    found = await runtime.store.asearch(("memories", user))
    return {"count": len(found)}


_remember_builder = StateGraph(MemoryState)
_remember_builder.add_node("remember", _remember)
_remember_builder.add_edge(START, "remember")
remember = _remember_builder.compile(name="remember")

"""Graph loading from langgraph.json: targets, factories, runtime objects, config errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel
from langgraph.store.memory import InMemoryStore

from app.errors import NotFound
from app.graphs.config import GraphConfigError, parse_dotenv
from app.graphs.registry import load_registry

GRAPHS_PY = """
import contextlib
from typing_extensions import TypedDict
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph_sdk.runtime import ServerRuntime
import helper_dep  # found through "dependencies"

class S(TypedDict, total=False):
    tag: str

def builder(tag: str = "static") -> StateGraph:
    b = StateGraph(S)
    b.add_node("n", lambda s: {"tag": tag})
    b.add_edge(START, "n")
    return b

compiled = builder().compile()
uncompiled = builder("uncompiled")
not_a_graph = 42

def plain_factory():
    return builder("plain").compile()

async def config_factory(config: RunnableConfig):
    return builder(config["configurable"].get("tag", "none")).compile()

SEEN = []

def runtime_factory(runtime: ServerRuntime):
    executing = runtime.execution_runtime is not None
    SEEN.append((type(runtime).__name__, runtime.access_context, executing))
    return builder("runtime")

def both_factory(config: RunnableConfig, runtime: ServerRuntime):
    return builder(f"{config['configurable'].get('tag')}-{runtime.access_context}").compile()

@contextlib.asynccontextmanager
async def cm_factory(config: RunnableConfig):
    SEEN.append("enter")
    yield builder("cm").compile()
    SEEN.append("exit")

def bad_factory():
    return "nope"
"""


def write_project(tmp_path: Path, graphs: dict, **extra) -> Path:
    (tmp_path / "deps").mkdir(exist_ok=True)
    (tmp_path / "deps" / "helper_dep.py").write_text("VALUE = 1\n")
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "graphs.py").write_text(GRAPHS_PY)
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["./deps"], "graphs": graphs, **extra}))
    return config


async def run_tag(registry, graph_id: str, **kw) -> str:
    config = {"configurable": {"thread_id": "t", "tag": "cfg"}}
    async with registry.open(
        graph_id, config=config, checkpointer=InMemorySaver(), store=InMemoryStore(), **kw
    ) as graph:
        assert isinstance(graph, Pregel)
        result = await graph.ainvoke({}, config)
    return result["tag"]


async def test_examples_load_without_config() -> None:
    registry = await load_registry(None)
    assert registry.graph_ids() == ["agent", "approval", "fanout", "memory", "long_conversation"]
    assert registry.spec("agent").name == "agent"
    assert registry.spec("approval").description


async def test_every_kind_of_target(tmp_path: Path) -> None:
    graphs = {
        name: f"./src/graphs.py:{name}"
        for name in (
            "compiled",
            "uncompiled",
            "plain_factory",
            "config_factory",
            "runtime_factory",
            "both_factory",
            "cm_factory",
        )
    }
    graphs["by_module"] = {"path": "app.examples.chat:graph", "description": "d"}
    registry = await load_registry(write_project(tmp_path, graphs))
    assert await run_tag(registry, "compiled") == "static"
    assert await run_tag(registry, "uncompiled") == "uncompiled"
    assert await run_tag(registry, "plain_factory") == "plain"
    assert await run_tag(registry, "config_factory") == "cfg"
    assert await run_tag(registry, "both_factory") == "cfg-threads.read"
    assert await run_tag(registry, "runtime_factory", access_context="threads.create_run") == (
        "runtime"
    )
    assert await run_tag(registry, "cm_factory") == "cm"
    module = next(m for n, m in sys.modules.items() if n.startswith("graphkeep_user_graphs.cm_"))
    assert module.SEEN[-2:] == ["enter", "exit"]
    runtime_module = next(
        m for n, m in sys.modules.items() if n.startswith("graphkeep_user_graphs.runtime_")
    )
    # the SDK's own runtime classes: an execution runtime for runs, a read runtime otherwise
    assert runtime_module.SEEN[-1] == ("_ExecutionRuntime", "threads.create_run", True)
    assert registry.spec("by_module").description == "d"
    assert registry.spec("compiled").kind == "compiled"
    assert registry.spec("config_factory").kind == "factory"
    # open() attaches the given checkpointer and store
    saver = InMemorySaver()
    async with registry.open(
        "compiled", config={"configurable": {}}, checkpointer=saver, store=None
    ) as graph:
        assert graph.checkpointer is saver
    with pytest.raises(NotFound, match="Graph 'missing' not found"):
        registry.spec("missing")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("./src/missing.py:graph", "file"),
        ("./src/graphs.py:nothing_here", "has no attribute 'nothing_here'"),
        ("./src/graphs.py:not_a_graph", "not a compiled graph"),
        ("no_such_module_xyz:graph", "importing 'no_such_module_xyz' failed"),
        ("no-colon", "is not of the form"),
        (42, "expected"),
    ],
)
async def test_bad_entries_name_the_graph(tmp_path: Path, entry, message: str) -> None:
    config = write_project(tmp_path, {"broken": entry})
    with pytest.raises(GraphConfigError, match=message) as info:
        await load_registry(config)
    assert "'broken'" in info.value.detail


async def test_factory_returning_garbage_fails_at_use(tmp_path: Path) -> None:
    registry = await load_registry(write_project(tmp_path, {"bad": "./src/graphs.py:bad_factory"}))
    with pytest.raises(GraphConfigError, match="not a graph"):
        async with registry.open("bad", config={}, checkpointer=None, store=None):
            pass


async def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match="not found"):
        await load_registry(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(GraphConfigError, match="not valid JSON"):
        await load_registry(bad)
    bad.write_text(json.dumps({"graphs": {}}))
    with pytest.raises(GraphConfigError, match="non-empty"):
        await load_registry(bad)
    bad.write_text(json.dumps({"graphs": {"a": "m:g"}, "store": {"index": 3}}))
    with pytest.raises(GraphConfigError, match="store.index"):
        await load_registry(bad)


async def test_env_store_and_checkpointer_config(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("GK_TEST_FROM_DICT", raising=False)
    monkeypatch.delenv("GK_TEST_FROM_FILE", raising=False)
    config = write_project(
        tmp_path,
        {"g": "./src/graphs.py:compiled"},
        env={"GK_TEST_FROM_DICT": "1"},
        store={"index": {"dims": 8, "embed": "x:y"}, "ttl": {"default_ttl": 5}},
        checkpointer={"ttl": {"strategy": "delete", "default_ttl": 60}},
    )
    registry = await load_registry(config)
    assert os.environ["GK_TEST_FROM_DICT"] == "1"
    assert registry.config.store_index == {"dims": 8, "embed": "x:y"}
    assert registry.config.store_ttl == {"default_ttl": 5}
    assert registry.config.checkpointer_ttl == {"strategy": "delete", "default_ttl": 60}
    (tmp_path / ".env").write_text("# comment\nexport GK_TEST_FROM_FILE='quoted value'\n")
    config = write_project(tmp_path, {"g": "./src/graphs.py:compiled"}, env=".env")
    await load_registry(config)
    assert os.environ["GK_TEST_FROM_FILE"] == "quoted value"


def test_parse_dotenv() -> None:
    assert parse_dotenv('A=1\n# c\nB="two words"\nC=x # trailing\nnot a line\n') == {
        "A": "1",
        "B": "two words",
        "C": "x",
    }

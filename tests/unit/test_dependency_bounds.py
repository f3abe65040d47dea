"""pyproject.toml bounds every dependency whose internals graphkeep uses, and the versions CI
installs (constraints.txt, the running environment) fit every declared range."""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# The internals graphkeep cannot avoid, each bounded to the minor CI tested:
# - aiosqlite: the SQLite fast path runs a whole unit in its worker thread (app/db/direct.py;
#   on aiosqlite's public calls, a hop per step, the SQLite put fell to 0.78x the official
#   saver: docs/architecture.md);
# - sqlalchemy, asyncpg: the fast path's drivers (app/db/direct.py, app/db/driver_errors.py);
# - fastapi: the flat route table (app/api/routing.py) relies on how the router matches;
# - langgraph-sdk: custom auth reads the `Auth` object's registered handlers, which the SDK
#   exposes only as attributes its server reads (app/auth/custom.py `registered`), and a graph
#   factory's `runtime` argument is built from the members of the public `ServerRuntime` alias
#   (app/graphs/registry.py; the test below);
# - langgraph: the strict-resume config key, which LangGraph exports only privately, so
#   app/runs/resume.py spells it (the test below shows LangGraph still reads it).
INTERNALS_USED = {"sqlalchemy", "asyncpg", "aiosqlite", "fastapi", "langgraph-sdk", "langgraph"}


def _requirements() -> dict[str, Requirement]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {canonicalize_name(r.name): r for r in map(Requirement, deps)}


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, pinned = line.strip().partition("==")
        if sep:
            pins[canonicalize_name(name)] = pinned
    return pins


def test_libraries_whose_internals_we_use_have_an_upper_bound() -> None:
    reqs = _requirements()
    for name in INTERNALS_USED:
        uppers = [s for s in reqs[name].specifier if s.operator in ("<", "<=", "~=", "==")]
        assert uppers, f"{name} needs an upper bound in pyproject.toml"


def test_installed_and_pinned_versions_fit_the_declared_ranges() -> None:
    pins = _pins()
    for name, req in _requirements().items():
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name])
        assert req.specifier.contains(version(name), prereleases=True), (name, version(name))


def test_langgraph_reads_the_strict_resume_key_graphkeep_sets() -> None:
    """app/runs/resume.py spells LangGraph's private config key; LangGraph must still act on
    it: an unknown interrupt id is refused with the key, and ignored without it."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.errors import UnknownInterruptError
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command, interrupt
    from typing_extensions import TypedDict

    from app.runs.resume import STRICT_RESUME_KEY

    class State(TypedDict, total=False):
        answer: str

    def ask(state: State) -> State:
        return {"answer": str(interrupt("question?"))}

    graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask")
    app = graph.compile(checkpointer=InMemorySaver())
    unknown = Command(resume={"0" * 32: "x"})
    for thread, strict in (("lenient", False), ("strict", True)):
        config: Any = {"configurable": {"thread_id": thread}}
        app.invoke({}, config)
        if strict:
            config["configurable"][STRICT_RESUME_KEY] = True
            with pytest.raises(UnknownInterruptError):
                app.invoke(unknown, config)
        else:
            app.invoke(unknown, config)  # the interrupt stays pending
        assert app.get_state(config).interrupts, thread


def test_factories_get_the_members_of_the_public_server_runtime_alias() -> None:
    from langgraph_sdk.runtime import ServerRuntime

    from app.graphs.registry import EXECUTION_RUNTIME, READ_RUNTIME

    members = {get_origin(m) or m for m in get_args(ServerRuntime.__value__)}
    assert {EXECUTION_RUNTIME, READ_RUNTIME} == members
    run = EXECUTION_RUNTIME(access_context="threads.create_run", store=None, context={"k": 1})
    assert run.execution_runtime is run
    read = READ_RUNTIME(access_context="threads.read", store=None)
    assert read.execution_runtime is None


def test_an_unknown_shape_of_the_server_runtime_alias_stops_start_up() -> None:
    from dataclasses import dataclass

    from typing_extensions import TypeAliasType

    from app.graphs.registry import runtime_classes

    @dataclass
    class NoContext:
        user: Any = None

    @dataclass
    class AlsoNoContext:
        user: Any = None

    for value in (NoContext | AlsoNoContext, int | NoContext, NoContext):
        with pytest.raises(RuntimeError, match="ServerRuntime"):
            runtime_classes(TypeAliasType("Changed", value))


def test_no_module_imports_a_private_name_of_a_dependency() -> None:
    own = ("app", "graphkeep_client")
    found = []
    for root in (ROOT / "app", ROOT / "sdk" / "graphkeep_client"):
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules, names = [node.module], [alias.name for alias in node.names]
                elif isinstance(node, ast.Import):
                    modules, names = [alias.name for alias in node.names], []
                else:
                    continue
                for module in modules:
                    if module.split(".")[0] in own or module == "__future__":
                        continue
                    private = [p for p in module.split(".") if p.startswith("_")]
                    private += [n for n in names if n.startswith("_")]
                    if private:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {module} {private}")
    assert not found, found

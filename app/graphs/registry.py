"""GraphRegistry: the graphs named by a langgraph.json-compatible config.

An entry's attribute may be a compiled graph, an uncompiled `StateGraph`, or a factory (sync or
async, optionally a context manager) taking nothing, `config`, a `ServerRuntime`, or
`(config, runtime)`. User modules are imported off the event loop. Every build attaches the
caller's checkpointer and store, so tenant scoping is decided by the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph_sdk.runtime import ServerRuntime

from app.errors import NotFound
from app.graphs.config import (
    GraphConfigError,
    GraphEntry,
    ServerConfig,
    apply_environment,
    read_config,
)
from app.user_modules import UserModuleError, add_dependency_paths, import_user_module

EXAMPLES_CONFIG = Path(__file__).resolve().parent.parent / "examples" / "langgraph.json"
DEFAULT_GRAPH_NAME = "LangGraph"  # what langgraph names a graph that was not given a name

AccessContext = Literal["threads.create_run", "threads.update", "threads.read", "assistants.read"]
GraphKind = Literal["compiled", "factory"]


def runtime_classes(alias: Any = ServerRuntime) -> tuple[type[Any], type[Any]]:
    """The execution and the read runtime a factory receives, read off the SDK's public
    `ServerRuntime` alias (their union) rather than imported by their private names.

    The execution variant is the member that carries `context`. Any other shape of the
    alias stops start-up here, naming the SDK, instead of handing factories a wrong object.
    """
    members = [get_origin(member) or member for member in get_args(alias.__value__)]
    classes = [m for m in members if dataclasses.is_dataclass(m) and isinstance(m, type)]
    execution = [m for m in classes if "context" in {f.name for f in dataclasses.fields(m)}]
    read = [m for m in classes if m not in execution]
    if len(members) != 2 or len(execution) != 1 or len(read) != 1:
        raise RuntimeError("langgraph_sdk.runtime.ServerRuntime is not the union this server knows")
    return execution[0], read[0]


EXECUTION_RUNTIME, READ_RUNTIME = runtime_classes()


@dataclass(frozen=True)
class GraphSpec:
    """What the registry knows about one graph without building it."""

    graph_id: str
    name: str  # the graph's own name if it set one, else the graph id
    description: str | None
    config: dict[str, Any]  # assistant config from the langgraph.json entry
    kind: GraphKind


@dataclass
class _Loaded:
    spec: GraphSpec
    compiled: Pregel[Any, Any, Any, Any] | None = None
    factory: Callable[..., Any] | None = None
    factory_args: tuple[str, ...] = field(default_factory=tuple)  # "config" / "runtime"
    transformers_hook: Callable[[], Any] | None = None  # the module's stream_transformers()


def _is_runtime_param(param: inspect.Parameter) -> bool:
    annotation = param.annotation
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return param.name == "runtime" or "ServerRuntime" in text or "Runtime" in text


def _factory_args(func: Callable[..., Any], graph_id: str) -> tuple[str, ...]:
    try:
        params = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is inspect.Parameter.empty
        ]
    except (TypeError, ValueError):  # builtins without a signature: call with nothing
        return ()
    if len(params) > 2:
        raise GraphConfigError(
            f"graph {graph_id!r}: a factory takes at most (config, runtime), "
            f"not {len(params)} arguments"
        )
    if len(params) == 2:
        return ("config", "runtime")
    if len(params) == 1:
        return ("runtime",) if _is_runtime_param(params[0]) else ("config",)
    return ()


def _import_target(entry: GraphEntry, base_dir: Path) -> tuple[Any, Any]:
    """Import the module of `entry.target`; its attribute and the module's optional
    `stream_transformers()` hook (the thread-stream protocol's extra transformers)."""
    module_part, _, attr = entry.target.rpartition(":")
    if not module_part or not attr:
        raise GraphConfigError(f"graph {entry.graph_id!r}: bad target {entry.target!r}")
    try:
        module = import_user_module(
            module_part, base_dir, namespace=f"graphkeep_user_graphs.{entry.graph_id}"
        )
    except UserModuleError as exc:
        raise GraphConfigError(f"graph {entry.graph_id!r}: {exc.detail}") from None
    except GraphConfigError:
        raise
    except Exception as exc:
        raise GraphConfigError(
            f"graph {entry.graph_id!r}: importing {module_part!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(module, attr), getattr(module, "stream_transformers", None)
    except AttributeError:
        raise GraphConfigError(
            f"graph {entry.graph_id!r}: {module_part!r} has no attribute {attr!r}"
        ) from None


def _load_entry(entry: GraphEntry, base_dir: Path) -> _Loaded:
    obj, hook = _import_target(entry, base_dir)
    loaded = _loaded_entry(entry, obj)
    loaded.transformers_hook = hook if callable(hook) else None
    return loaded


def _loaded_entry(entry: GraphEntry, obj: Any) -> _Loaded:
    if isinstance(obj, StateGraph):
        obj = obj.compile()
    if isinstance(obj, Pregel):
        name = obj.name if obj.name and obj.name != DEFAULT_GRAPH_NAME else entry.graph_id
        spec = GraphSpec(entry.graph_id, name, entry.description, entry.config, "compiled")
        return _Loaded(spec=spec, compiled=obj)
    if callable(obj):
        spec = GraphSpec(entry.graph_id, entry.graph_id, entry.description, entry.config, "factory")
        return _Loaded(spec=spec, factory=obj, factory_args=_factory_args(obj, entry.graph_id))
    raise GraphConfigError(
        f"graph {entry.graph_id!r}: {entry.target!r} is a {type(obj).__name__}, "
        "not a compiled graph, a StateGraph or a factory"
    )


def _load_all(config: ServerConfig) -> dict[str, _Loaded]:
    """Blocking part of loading: sys.path, env, imports."""
    # Entries that are not local paths are pip requirements: installed already or not.
    add_dependency_paths(config.base_dir, list(config.dependencies))
    apply_environment(config)
    return {entry.graph_id: _load_entry(entry, config.base_dir) for entry in config.graphs}


class GraphRegistry:
    """Graphs by id; `open` attaches a checkpointer and store for one use."""

    def __init__(self, config: ServerConfig, loaded: dict[str, _Loaded]) -> None:
        self.config = config
        self._loaded = loaded

    def graph_ids(self) -> list[str]:
        """Registered graph ids, in config order."""
        return list(self._loaded)

    def has(self, graph_id: str) -> bool:
        return graph_id in self._loaded

    def spec(self, graph_id: str) -> GraphSpec:
        """The graph's spec; NotFound for an unknown graph id."""
        return self._get(graph_id).spec

    def stream_transformers(self, graph_id: str) -> list[Any]:
        """What the graph module's `stream_transformers()` returns (none without one)."""
        hook = self._get(graph_id).transformers_hook
        return list(hook() or []) if hook is not None else []

    def _get(self, graph_id: str) -> _Loaded:
        try:
            return self._loaded[graph_id]
        except KeyError:
            raise NotFound(f"Graph '{graph_id}' not found") from None

    @contextlib.asynccontextmanager
    async def open(
        self,
        graph_id: str,
        *,
        config: RunnableConfig,
        checkpointer: Any,
        store: Any,
        access_context: AccessContext = "threads.read",
        context: Any = None,
        user: Any = None,
    ) -> AsyncIterator[Pregel[Any, Any, Any, Any]]:
        """The graph for one use, inside any context a context-manager factory opens."""
        loaded = self._get(graph_id)
        if loaded.compiled is not None:
            yield _attach(loaded.compiled, checkpointer, store)
            return
        assert loaded.factory is not None
        result = loaded.factory(
            *self._factory_call_args(loaded, config, store, access_context, context, user)
        )
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, contextlib.AbstractAsyncContextManager):
            async with result as graph:
                yield _attach(_as_pregel(graph, graph_id), checkpointer, store)
            return
        if isinstance(result, contextlib.AbstractContextManager):
            with result as graph:
                yield _attach(_as_pregel(graph, graph_id), checkpointer, store)
            return
        yield _attach(_as_pregel(result, graph_id), checkpointer, store)

    @staticmethod
    def _factory_call_args(
        loaded: _Loaded,
        config: RunnableConfig,
        store: Any,
        access_context: AccessContext,
        context: Any,
        user: Any,
    ) -> list[Any]:
        args: list[Any] = []
        for kind in loaded.factory_args:
            if kind == "config":
                args.append(config)
            elif access_context == "threads.create_run":
                args.append(
                    EXECUTION_RUNTIME(
                        access_context=access_context, user=user, store=store, context=context
                    )
                )
            else:
                args.append(READ_RUNTIME(access_context=access_context, user=user, store=store))
        return args


def _as_pregel(obj: Any, graph_id: str) -> Pregel[Any, Any, Any, Any]:
    if isinstance(obj, StateGraph):
        obj = obj.compile()
    if not isinstance(obj, Pregel):
        raise GraphConfigError(
            f"graph {graph_id!r}: the factory returned a {type(obj).__name__}, not a graph"
        )
    return obj


def _attach(
    graph: Pregel[Any, Any, Any, Any], checkpointer: Any, store: Any
) -> Pregel[Any, Any, Any, Any]:
    # A shallow copy: nodes and channels are shared, only these attributes differ. Not
    # `graph.copy(update=...)`: that re-runs the constructor and validates the whole graph
    # again, on every state read and run (tens of microseconds); this graph is validated.
    copied: Pregel[Any, Any, Any, Any] = copy.copy(graph)
    copied.checkpointer = checkpointer
    copied.store = store
    return copied


async def load_registry(config_path: Path | None) -> GraphRegistry:
    """Load the config (None = the shipped example graphs) and import every graph."""
    path = config_path if config_path is not None else EXAMPLES_CONFIG
    config = await asyncio.to_thread(read_config, path)
    if config_path is None:
        config = ServerConfig(
            base_dir=config.base_dir,
            graphs=config.graphs,
            dependencies=config.dependencies,
            env=config.env,
            store=config.store,
            checkpointer=config.checkpointer,
            source=None,
            raw=config.raw,
        )
    loaded = await asyncio.to_thread(_load_all, config)
    return GraphRegistry(config, loaded)

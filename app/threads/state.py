"""Thread state, history and update_state, through LangGraph and the tenant's saver.

LangGraph computes the snapshots (next tasks, interrupts, subgraphs); this module picks the
graph, builds the config and turns snapshots into the wire shape of contract section 4.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import EmptyInputError, InvalidUpdateError
from langgraph.types import StateSnapshot
from langgraph.types import StateUpdate as GraphUpdate
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.access import read, transaction
from app.db.types import utcnow
from app.errors import Conflict, InvalidInput, NotFound, ValidationFailed
from app.graphs.jsonable import interrupt_json, to_jsonable
from app.graphs.registry import AccessContext, GraphRegistry
from app.statuses import ThreadStatus
from app.threads import queries as q
from app.threads.run_status import has_active_runs
from app.threads.schemas import (
    CheckpointRef,
    HistoryRequest,
    JSONObject,
    StateUpdate,
    StateUpdateResult,
    Thread,
    ThreadCreate,
    ThreadState,
)
from app.threads.service import GraphStorage, ThreadService, parse_thread_id

CHECKPOINT_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map")

# Called with the open transaction, the thread id and its new state after a state update.
StateChangeHook = Callable[[AsyncConnection, str, ThreadState], Awaitable[None]]


def empty_state_json() -> JSONObject:
    """A thread that exists but has no checkpoint (or no graph yet), in the wire shape."""
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": None,
        "parent_checkpoint": None,
        "metadata": None,
        "created_at": None,
        "interrupts": [],
        "checkpoint_id": None,
        "parent_checkpoint_id": None,
    }


def _checkpoint_json(config: RunnableConfig | None) -> JSONObject | None:
    if not config:
        return None
    configurable = config.get("configurable") or {}
    if not configurable.get("checkpoint_id"):
        return None
    result: JSONObject = {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable["checkpoint_id"],
    }
    if configurable.get("checkpoint_map"):
        result["checkpoint_map"] = configurable["checkpoint_map"]
    return result


def _task_json(task: Any) -> JSONObject:
    nested = task.state
    result: JSONObject = {
        "id": task.id,
        "name": task.name,
        "path": list(task.path) if task.path else [],
        "error": None if task.error is None else f"{type(task.error).__name__}({task.error})",
        "interrupts": [interrupt_json(i) for i in task.interrupts],
        "checkpoint": None,
        "state": None,
        "result": task.result,
    }
    if isinstance(nested, StateSnapshot):
        result["state"] = snapshot_json(nested)
    elif nested:
        # A subgraph task's config: {thread_id, checkpoint_ns} (checkpoint_id once it has one).
        configurable = nested.get("configurable") or {}
        result["checkpoint"] = {
            k: configurable[k] for k in CHECKPOINT_KEYS if configurable.get(k) is not None
        } or None
    return result


def snapshot_json(snapshot: StateSnapshot) -> JSONObject:
    """LangGraph's StateSnapshot in the contract's ThreadState shape, ready for the JSON
    encoder (app.graphs.jsonable): graph values are not copied into JSON types first, so a
    state is walked once, when the response is written."""
    checkpoint = _checkpoint_json(snapshot.config)
    if snapshot.created_at is None and snapshot.metadata is None:
        return empty_state_json()
    parent = _checkpoint_json(snapshot.parent_config)
    return {
        "values": snapshot.values,
        "next": list(snapshot.next),
        "tasks": [_task_json(task) for task in snapshot.tasks],
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "metadata": snapshot.metadata,
        "created_at": snapshot.created_at,
        "interrupts": [interrupt_json(i) for i in snapshot.interrupts],
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def snapshot_to_state(snapshot: StateSnapshot) -> ThreadState:
    """LangGraph's StateSnapshot as a ThreadState model (JSON types only)."""
    return ThreadState.model_validate(to_jsonable(snapshot_json(snapshot)))


# `select` on state and history reads: top-level ThreadState fields, or `values.<key>` for
# one state key (the SDK's ThreadStateSelectField).
STATE_FIELDS = (
    "values",
    "next",
    "tasks",
    "checkpoint",
    "parent_checkpoint",
    "metadata",
    "created_at",
    "interrupts",
    "checkpoint_id",
    "parent_checkpoint_id",
)


@dataclass(frozen=True)
class StateSelection:
    """A validated `select`: the fields to keep, and which state keys of `values`."""

    fields: tuple[str, ...]
    value_keys: tuple[str, ...] | None  # None: the whole `values`

    def apply(self, state: JSONObject) -> JSONObject:
        result = {name: state[name] for name in self.fields}
        if self.value_keys is not None and "values" in result:
            values = result["values"]
            if isinstance(values, Mapping):
                result["values"] = {k: values[k] for k in self.value_keys if k in values}
        return result


def parse_state_select(select: Sequence[str] | None) -> StateSelection | None:
    """`select` as a StateSelection (None: every field); 422 naming the allowed fields."""
    if not select:
        return None
    fields: list[str] = []
    value_keys: list[str] = []
    whole_values = False
    unknown = []
    for name in select:
        if name.startswith("values.") and len(name) > len("values."):
            value_keys.append(name[len("values.") :])
            name = "values"
        elif name == "values":
            whole_values = True
        elif name not in STATE_FIELDS:
            unknown.append(name)
            continue
        if name not in fields:
            fields.append(name)
    if unknown:
        raise ValidationFailed(
            f"select: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(STATE_FIELDS)}, or values.<key>"
        )
    keys = None if whole_values or not value_keys else tuple(dict.fromkeys(value_keys))
    return StateSelection(tuple(fields), keys)


def _selected(state: JSONObject, selection: StateSelection | None) -> JSONObject:
    return state if selection is None else selection.apply(state)


def _thread_config(thread_id: str, checkpoint: CheckpointRef | JSONObject | None) -> RunnableConfig:
    ref: JSONObject = (
        checkpoint.model_dump(exclude_none=True)
        if isinstance(checkpoint, CheckpointRef)
        else dict(checkpoint or {})
    )
    configurable: JSONObject = {"checkpoint_ns": ""}
    configurable.update({k: v for k, v in ref.items() if k in CHECKPOINT_KEYS and v is not None})
    configurable["thread_id"] = thread_id  # the path's thread id always wins
    return {"configurable": configurable}


def _graph_id(thread_id: str, metadata: JSONObject, graphs: GraphRegistry) -> str | None:
    graph_id = metadata.get("graph_id")
    if not isinstance(graph_id, str):
        return None
    if not graphs.has(graph_id):
        raise NotFound(f"Graph '{graph_id}' of thread '{thread_id}' not found")
    return graph_id


def _scoped(component: Any, tenant_id: str) -> Any:
    return component.for_tenant(tenant_id) if component is not None else None


async def get_state(
    storage: GraphStorage,
    *,
    tenant_id: str,
    thread_id: str,
    checkpoint: CheckpointRef | JSONObject | None = None,
    subgraphs: bool = False,
    select: Sequence[str] | None = None,
) -> JSONObject:
    """Latest state, or the state at `checkpoint` (404 if that checkpoint does not exist),
    in the wire shape (`snapshot_json`), trimmed to `select`."""
    selection = parse_state_select(select)
    graphs, saver, store = storage.graphs, storage.saver, storage.store
    thread_id = parse_thread_id(thread_id)
    config = _thread_config(thread_id, checkpoint)
    checkpointer = _scoped(saver, tenant_id)
    prefetch = getattr(checkpointer, "aprefetch_tuple", None)
    metadata, checkpointer = await _with_thread(
        storage.threads,
        tenant_id,
        thread_id,
        checkpointer,
        None if prefetch is None else lambda guard: prefetch(config, guard=guard),
    )
    graph_id = _graph_id(thread_id, metadata, graphs)
    if graph_id is None:
        return _selected(empty_state_json(), selection)
    async with _open(
        graphs, graph_id, config, saver, store, tenant_id, "threads.read", checkpointer
    ) as graph:
        snapshot = await graph.aget_state(config, subgraphs=subgraphs)
    state = snapshot_json(snapshot)
    wanted = config["configurable"].get("checkpoint_id")
    if wanted and state["checkpoint"] is None:
        raise NotFound(f"Checkpoint '{wanted}' not found in thread '{thread_id}'")
    return _selected(state, selection)


async def _with_thread(
    service: ThreadService,
    tenant_id: str,
    thread_id: str,
    checkpointer: Any,
    prefetch: Callable[[Any], Awaitable[tuple[Any, list[Any] | None]]] | None,
) -> tuple[JSONObject, Any]:
    """The thread's metadata (404 if the tenant has no such thread) and the checkpointer.

    With `prefetch` (the saver's `aprefetch_*`), the checkpoint read LangGraph is about to
    make is done now, with the thread row riding in the same statement (the saver's guard
    rows), so a state read is one round trip; LangGraph then gets the checkpoint from the
    returned view."""
    if prefetch is None:
        _, metadata = await service.get_thread_metadata(tenant_id=tenant_id, thread_id=thread_id)
        return metadata, checkpointer
    view, rows = await prefetch(q.THREAD_METADATA)
    if rows is None:  # the read was not one statement: the thread row on its own
        _, metadata = await service.get_thread_metadata(tenant_id=tenant_id, thread_id=thread_id)
    elif not rows:
        raise NotFound(f"Thread '{thread_id}' not found")
    else:
        metadata = dict(rows[0] or {})
    return metadata, view


def _open(
    graphs: GraphRegistry,
    graph_id: str,
    config: RunnableConfig,
    saver: Any,
    store: Any,
    tenant_id: str,
    access_context: AccessContext,
    checkpointer: Any = None,
) -> Any:
    return graphs.open(
        graph_id,
        config=config,
        checkpointer=checkpointer if checkpointer is not None else _scoped(saver, tenant_id),
        store=_scoped(store, tenant_id),
        access_context=access_context,
    )


def normalize_before(before: str | JSONObject | None) -> str | None:
    """`before` as a checkpoint id: an id, a flat checkpoint dict or a RunnableConfig."""
    if before is None:
        return None
    if isinstance(before, str):
        return before or None
    configurable = before.get("configurable")
    source = configurable if isinstance(configurable, dict) else before
    checkpoint_id = source.get("checkpoint_id")
    if checkpoint_id is None:
        return None
    if not isinstance(checkpoint_id, str):
        raise InvalidInput("before.checkpoint_id must be a string")
    return checkpoint_id


async def get_history(
    storage: GraphStorage,
    *,
    tenant_id: str,
    thread_id: str,
    body: HistoryRequest,
) -> list[JSONObject]:
    """Checkpoints newest first in the wire shape (`snapshot_json`), each trimmed to
    `body.select`; `[]` for a thread without a graph."""
    selection = parse_state_select(body.select)
    graphs, saver, store = storage.graphs, storage.saver, storage.store
    thread_id = parse_thread_id(thread_id)
    config = _thread_config(thread_id, body.checkpoint)
    before_id = normalize_before(body.before)
    before: RunnableConfig | None = None
    if before_id:
        before = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": config["configurable"].get("checkpoint_ns", ""),
                "checkpoint_id": before_id,
            }
        }
    checkpointer = _scoped(saver, tenant_id)
    prefetch = None if body.metadata else getattr(checkpointer, "aprefetch_list", None)
    metadata, checkpointer = await _with_thread(
        storage.threads,
        tenant_id,
        thread_id,
        checkpointer,
        None
        if prefetch is None
        else lambda guard: prefetch(config, before=before, limit=body.limit, guard=guard),
    )
    graph_id = _graph_id(thread_id, metadata, graphs)
    if graph_id is None:
        return []
    async with _open(
        graphs, graph_id, config, saver, store, tenant_id, "threads.read", checkpointer
    ) as graph:
        return [
            _selected(snapshot_json(snapshot), selection)
            async for snapshot in graph.aget_state_history(
                config, limit=body.limit, before=before, filter=body.metadata or None
            )
        ]


async def create_thread_with_supersteps(
    storage: GraphStorage,
    *,
    tenant_id: str,
    body: ThreadCreate,
    on_change: StateChangeHook | None = None,
) -> Thread:
    """Create a thread and apply `supersteps` as bulk state updates (LangGraph's
    `abulk_update_state`). A thread that already exists is returned or refused as usual,
    without applying anything; a failing update removes the new thread again.
    `on_change` as for update_state."""
    engine, graphs, saver, store = storage.engine, storage.graphs, storage.saver, storage.store
    graph_id = (body.metadata or {}).get("graph_id")
    if not isinstance(graph_id, str) or not graphs.has(graph_id):
        raise InvalidInput("supersteps need metadata.graph_id naming a registered graph")
    if any(u.command is not None for step in body.supersteps or [] for u in step.updates):
        raise InvalidInput("supersteps: `command` updates are not supported; send `values`")
    if body.thread_id is not None:
        existing = await storage.threads.find_thread(
            tenant_id=tenant_id, thread_id=parse_thread_id(body.thread_id)
        )
        if existing is not None:
            return await storage.threads.create_thread(tenant_id=tenant_id, body=body)
    thread = await storage.threads.create_thread(tenant_id=tenant_id, body=body)
    config = _thread_config(thread.thread_id, None)
    supersteps = [
        [GraphUpdate(u.values, u.as_node) for u in step.updates] for step in body.supersteps or []
    ]
    try:
        async with _open(
            graphs, graph_id, config, saver, store, tenant_id, "threads.update"
        ) as graph:
            await graph.abulk_update_state(config, supersteps)
            latest = snapshot_to_state(await graph.aget_state(config))
    except (InvalidUpdateError, EmptyInputError, ValueError, KeyError) as exc:
        await storage.threads.delete_thread(tenant_id=tenant_id, thread_id=thread.thread_id)
        raise InvalidInput(f"invalid supersteps: {exc}") from exc
    await _store_latest(engine, tenant_id, thread.thread_id, latest, on_change)
    return await storage.threads.get_thread(tenant_id=tenant_id, thread_id=thread.thread_id)


async def _store_latest(
    engine: AsyncEngine,
    tenant_id: str,
    thread_id: str,
    latest: ThreadState,
    on_change: StateChangeHook | None,
) -> None:
    """The thread's cached status, values and interrupts from the state a write left
    (`latest`), with `on_change` in the same transaction."""
    async with transaction(engine) as conn:
        stmt = q.thread_state_update(
            tenant_id=tenant_id,
            thread_id=thread_id,
            status=ThreadStatus.INTERRUPTED if latest.next else ThreadStatus.IDLE,
            values=latest.values,
            interrupts=_interrupts_by_task(latest),
            now=utcnow(),
        )
        await conn.execute(stmt)
        if on_change is not None:
            await on_change(conn, thread_id, latest)


def _interrupts_by_task(state: ThreadState) -> JSONObject:
    return {task["id"]: task["interrupts"] for task in state.tasks if task.get("interrupts")}


async def update_state(
    storage: GraphStorage,
    *,
    tenant_id: str,
    thread_id: str,
    body: StateUpdate,
    on_change: StateChangeHook | None = None,
) -> StateUpdateResult:
    """Apply `values` as `as_node` (forking from `checkpoint` when given), refresh the thread.

    `on_change(conn, thread_id, state)` runs in the transaction that stores the new thread
    state (the thread stream's `state_update` event)."""
    engine, graphs, saver, store = storage.engine, storage.graphs, storage.saver, storage.store
    thread_id = parse_thread_id(thread_id)
    async with read(engine) as conn:  # one connection for both checks
        row = (await conn.execute(q.THREAD_ROW, q.thread_key(tenant_id, thread_id))).first()
        if row is None:
            raise NotFound(f"Thread '{thread_id}' not found")
        busy = await has_active_runs(conn, tenant_id=tenant_id, thread_id=thread_id)
    thread = q.row_to_thread(row)
    graph_id = _graph_id(thread.thread_id, thread.metadata, graphs)
    if graph_id is None:
        raise InvalidInput(
            f"Thread '{thread.thread_id}' has no graph yet: run it once, or create it with "
            "graph_id (metadata.graph_id) before updating its state"
        )
    if busy:
        raise Conflict(f"Thread '{thread.thread_id}' has a pending or running run")
    ref: JSONObject = body.checkpoint.model_dump(exclude_none=True) if body.checkpoint else {}
    if body.checkpoint_id and "checkpoint_id" not in ref:
        ref["checkpoint_id"] = body.checkpoint_id
    config = _thread_config(thread.thread_id, ref)
    async with _open(graphs, graph_id, config, saver, store, tenant_id, "threads.update") as graph:
        try:
            new_config = await graph.aupdate_state(config, body.values, as_node=body.as_node)
        except (InvalidUpdateError, EmptyInputError, ValueError, KeyError) as exc:
            raise InvalidInput(f"invalid state update: {exc}") from exc
        latest = snapshot_to_state(await graph.aget_state(_thread_config(thread.thread_id, None)))
    await _store_latest(engine, tenant_id, thread.thread_id, latest, on_change)
    checkpoint = _checkpoint_json(new_config) or {}
    return StateUpdateResult(
        checkpoint=checkpoint,
        configurable=checkpoint,
        checkpoint_id=checkpoint.get("checkpoint_id", ""),
    )

"""From the run payload to langgraph arguments, and from langgraph chunks to stream events.

Event names follow the contract (section 6.3): the mode, plus `|<ns>` segments for subgraph
chunks; `messages` is reshaped server-side into `messages/metadata` + `messages/partial` or
`messages/complete`, while `messages-tuple` passes langgraph's raw `(chunk, metadata)` pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langgraph.types import Command, Send

from app.graphs.jsonable import dumps

# v1 stream modes accepted on run endpoints; `tools` / `lifecycle` are v2-only (422).
STREAM_MODES = frozenset(
    {
        "values",
        "updates",
        "messages",
        "messages-tuple",
        "events",
        "debug",
        "custom",
        "tasks",
        "checkpoints",
    }
)
V2_ONLY_MODES = frozenset({"tools", "lifecycle"})


def graph_stream_modes(requested: list[str]) -> list[str]:
    """The langgraph stream modes to ask for (`events` comes from astream_events instead)."""
    modes: list[str] = []
    for mode in requested:
        mapped = "messages" if mode in ("messages", "messages-tuple") else mode
        if mapped != "events" and mapped not in modes:
            modes.append(mapped)
    return modes


def _goto(value: Any) -> Any:
    items = value if isinstance(value, list) else [value]
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and "node" in item:
            out.append(Send(item["node"], item.get("input")))
        else:
            out.append(item)
    return out


def graph_input(kwargs: dict[str, Any]) -> Any:
    """The input for `graph.astream`: a `Command` if the payload has one, else `input`."""
    command = kwargs.get("command")
    if command:
        args: dict[str, Any] = {}
        if command.get("resume") is not None:
            args["resume"] = command["resume"]
        update = command.get("update")
        if update is not None:
            if isinstance(update, list):
                update = [tuple(pair) for pair in update]
            args["update"] = update
        if command.get("goto") is not None:
            args["goto"] = _goto(command["goto"])
        return Command(**args)
    return kwargs.get("input")


def event_name(mode: str, ns: tuple[str, ...]) -> str:
    return "|".join((mode, *ns)) if ns else mode


class ChunkTranslator:
    """Turns `(namespace, mode, chunk)` from langgraph into `(event, json)` pairs."""

    def __init__(self, requested: list[str]) -> None:
        self.requested = set(requested)
        self._messages: dict[str, BaseMessageChunk] = {}
        self._seen_ids: set[str] = set()

    def translate(self, ns: tuple[str, ...], mode: str, chunk: Any) -> Iterator[tuple[str, str]]:
        if mode == "messages":
            yield from self._messages_events(ns, chunk)
            return
        if mode in self.requested:
            if mode == "debug":
                chunk = debug_chunk(chunk)
            yield event_name(mode, ns), dumps(chunk)

    def _messages_events(self, ns: tuple[str, ...], chunk: Any) -> Iterator[tuple[str, str]]:
        message, metadata = chunk
        if "messages-tuple" in self.requested:
            yield event_name("messages", ns), dumps([message, metadata])
        if "messages" not in self.requested:
            return
        msg_id = getattr(message, "id", None) or f"run-{len(self._seen_ids)}"
        if msg_id not in self._seen_ids:
            self._seen_ids.add(msg_id)
            yield (
                event_name("messages/metadata", ns),
                dumps({msg_id: {"metadata": metadata}}),
            )
        if isinstance(message, BaseMessageChunk):
            previous = self._messages.get(msg_id)
            merged = message if previous is None else previous + message
            self._messages[msg_id] = merged
            yield event_name("messages/partial", ns), dumps([message_chunk_to_message(merged)])
        elif isinstance(message, BaseMessage):
            yield event_name("messages/complete", ns), dumps([message])
        else:
            yield event_name("messages/complete", ns), dumps([message])


def config_to_checkpoint(config: Any) -> dict[str, Any] | None:
    """A RunnableConfig's checkpoint as the API's Checkpoint shape (None without an id)."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if (
        not configurable
        or not configurable.get("thread_id")
        or not configurable.get("checkpoint_id")
    ):
        return None
    checkpoint: dict[str, Any] = {
        "checkpoint_id": configurable["checkpoint_id"],
        "thread_id": configurable["thread_id"],
    }
    if "checkpoint_ns" in configurable:
        checkpoint["checkpoint_ns"] = configurable["checkpoint_ns"] or ""
    if "checkpoint_map" in configurable:
        checkpoint["checkpoint_map"] = configurable["checkpoint_map"]
    return checkpoint


def _debug_task(task: Any) -> Any:
    state = task.get("state") if isinstance(task, dict) else None
    if not isinstance(state, dict) or not state.get("configurable"):
        return task
    out = {k: v for k, v in task.items() if k != "state"}
    out["checkpoint"] = state["configurable"]
    return out


def debug_chunk(chunk: Any) -> Any:
    """The official server's `debug` checkpoint payload (contract 6.3): `checkpoint` and
    `parent_checkpoint` next to LangGraph's `config` / `parent_config`, and each task's
    `state` config replaced by a `checkpoint` key. Other debug chunks pass unchanged."""
    if not isinstance(chunk, dict) or chunk.get("type") != "checkpoint":
        return chunk
    payload = chunk.get("payload")
    if not isinstance(payload, dict):
        return chunk
    return {
        **chunk,
        "payload": {
            **payload,
            "checkpoint": config_to_checkpoint(payload.get("config")),
            "parent_checkpoint": config_to_checkpoint(payload.get("parent_config")),
            "tasks": [_debug_task(t) for t in payload.get("tasks") or []],
        },
    }


def split_chunk(item: Any, *, subgraphs: bool) -> tuple[tuple[str, ...], str, Any]:
    """Normalise langgraph's stream items (always asked for with a list of modes)."""
    if subgraphs:
        ns, mode, chunk = item
        return tuple(ns), mode, chunk
    mode, chunk = item
    return (), mode, chunk

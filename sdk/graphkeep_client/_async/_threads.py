"""Threads and their state: history, time travel and forks."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .._calls import (
    Call,
    drop_none,
    model,
    model_list,
    parse_checkpoint_ref,
    parse_int,
    parse_none,
    parse_pruned,
    seg,
)
from .._models import Checkpoint, IfExists, SortOrder, Thread, ThreadState, ThreadStatus
from .._payloads import checkpoint_json
from ._http import AsyncHTTP
from ._thread_stream import AsyncThreadStream, Transport


class AsyncThreads:
    """`client.threads`: thread CRUD plus state reads, history and state updates."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    def stream(
        self,
        thread_id: str | None = None,
        *,
        assistant_id: str,
        headers: Mapping[str, str] | None = None,
        transport: Transport = "sse",
    ) -> AsyncThreadStream:
        """A streaming session on one thread (the thread-stream protocol), shaped like
        `langgraph_sdk`'s: `thread_id=None` mints a UUID (the first `run.start` creates the
        thread); `transport` is "sse" or "websocket" (`graphkeep-client[websocket]`)."""
        return AsyncThreadStream(
            self._http,
            thread_id=thread_id if thread_id is not None else str(uuid.uuid4()),
            assistant_id=assistant_id,
            headers=headers,
            transport=transport,
        )

    async def create(
        self,
        *,
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists | None = None,
        graph_id: str | None = None,
        ttl: int | Mapping[str, Any] | None = None,
    ) -> Thread:
        """Create a thread.

        `graph_id` is stored as `metadata.graph_id`, which lets `update_state` work before the
        first run. `ttl` is minutes (or `{"ttl": minutes, "strategy": ...}`).
        """
        meta = dict(metadata or {})
        if graph_id is not None:
            meta["graph_id"] = graph_id
        if isinstance(ttl, int):
            ttl = {"ttl": ttl, "strategy": "delete"}
        body = drop_none(thread_id=thread_id, metadata=meta or None, if_exists=if_exists, ttl=ttl)
        repeatable = thread_id is not None and if_exists == "do_nothing"
        return await self._http.call(
            Call("POST", "/threads", _one, body=body, idempotent=repeatable)
        )

    async def get(self, thread_id: str, *, include_ttl: bool = False) -> Thread:
        """One thread by id (NotFound if it does not exist)."""
        params = {"include": "ttl"} if include_ttl else None
        return await self._http.call(Call("GET", f"/threads/{seg(thread_id)}", _one, params=params))

    async def update(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any],
        ttl: int | Mapping[str, Any] | None = None,
    ) -> Thread:
        """Merge `metadata` into the thread's metadata (and change its TTL)."""
        if isinstance(ttl, int):
            ttl = {"ttl": ttl, "strategy": "delete"}
        body = drop_none(metadata=dict(metadata), ttl=ttl)
        return await self._http.call(Call("PATCH", f"/threads/{seg(thread_id)}", _one, body=body))

    async def delete(self, thread_id: str) -> None:
        """Delete a thread with its runs and checkpoints."""
        await self._http.call(Call("DELETE", f"/threads/{seg(thread_id)}", parse_none))

    async def search(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
        status: ThreadStatus | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: str | None = None,
        sort_order: SortOrder | None = None,
        select: Sequence[str] | None = None,
    ) -> list[Thread]:
        """Threads matching all given filters (metadata / values by containment)."""
        body = drop_none(
            metadata=metadata,
            values=values,
            ids=list(ids) if ids is not None else None,
            status=status,
            limit=limit,
            offset=offset,
            sort_by=sort_by,
            sort_order=sort_order,
            select=list(select) if select is not None else None,
        )
        return await self._http.call(
            Call("POST", "/threads/search", _many, body=body, idempotent=True)
        )

    async def count(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> int:
        """How many threads match the filters."""
        body = drop_none(metadata=metadata, values=values, status=status)
        return await self._http.call(
            Call("POST", "/threads/count", parse_int, body=body, idempotent=True)
        )

    async def copy(self, thread_id: str) -> Thread:
        """A new thread with the same metadata and a copy of every checkpoint."""
        return await self._http.call(Call("POST", f"/threads/{seg(thread_id)}/copy", _one))

    async def prune(self, thread_ids: Sequence[str], *, keep_latest: bool = False) -> int:
        """Delete threads (or, with `keep_latest`, only their older checkpoints).

        Returns how many threads were pruned; unknown ids are skipped. Safe to repeat.
        """
        body: dict[str, Any] = {"thread_ids": list(thread_ids)}
        if keep_latest:
            body["strategy"] = "keep_latest"
        return await self._http.call(
            Call("POST", "/threads/prune", parse_pruned, body=body, idempotent=True)
        )

    async def get_state(
        self,
        thread_id: str,
        *,
        checkpoint: Checkpoint | Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        subgraphs: bool = False,
    ) -> ThreadState:
        """The thread's latest state, or its state at `checkpoint` / `checkpoint_id`."""
        base = f"/threads/{seg(thread_id)}/state"
        flag = "true" if subgraphs else "false"
        if checkpoint is not None:
            body = {"checkpoint": checkpoint_json(checkpoint), "subgraphs": subgraphs}
            call = Call("POST", f"{base}/checkpoint", _state, body=body, idempotent=True)
        elif checkpoint_id is not None:
            call = Call("GET", f"{base}/{seg(checkpoint_id)}", _state, params={"subgraphs": flag})
        else:
            call = Call("GET", base, _state, params={"subgraphs": flag})
        return await self._http.call(call)

    async def get_history(
        self,
        thread_id: str,
        *,
        limit: int = 10,
        before: str | Checkpoint | None = None,
        metadata: Mapping[str, Any] | None = None,
        checkpoint: Checkpoint | Mapping[str, Any] | None = None,
    ) -> list[ThreadState]:
        """The thread's checkpoints, newest first.

        `before` (a checkpoint id or Checkpoint) pages back; `metadata` filters by containment
        (e.g. `{"source": "update"}`); `checkpoint` selects a subgraph namespace.
        """
        if isinstance(before, Checkpoint):
            before = before.checkpoint_id
        body = drop_none(
            limit=limit,
            before=before,
            metadata=metadata,
            checkpoint=checkpoint_json(checkpoint) if checkpoint is not None else None,
        )
        path = f"/threads/{seg(thread_id)}/history"
        return await self._http.call(Call("POST", path, _history, body=body, idempotent=True))

    async def update_state(
        self,
        thread_id: str,
        values: Any,
        *,
        as_node: str | None = None,
        checkpoint: Checkpoint | Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> Checkpoint:
        """Write `values` into the thread's state, as if node `as_node` had returned them.

        With `checkpoint` (or `checkpoint_id`) the update branches from that older checkpoint:
        a fork, which becomes the thread's latest state. Returns the new checkpoint.
        """
        body: dict[str, Any] = {"values": values}
        if as_node is not None:
            body["as_node"] = as_node
        if checkpoint is not None:
            body["checkpoint"] = checkpoint_json(checkpoint)
        if checkpoint_id is not None:
            body["checkpoint_id"] = checkpoint_id
        path = f"/threads/{seg(thread_id)}/state"
        return await self._http.call(Call("POST", path, parse_checkpoint_ref, body=body))


_one = model(Thread.from_json)
_many = model_list(Thread.from_json)
_state = model(ThreadState.from_json)
_history = model_list(ThreadState.from_json)

"""Synchronous entry points that hand work to the saver's event loop.

Copied from langgraph's `AsyncPostgresSaver`: a sync call from another thread runs the async
method on the saver's loop (`run_coroutine_threadsafe`) and waits; a sync call *on* that loop
would deadlock it, so it raises `asyncio.InvalidStateError` at once instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

T = TypeVar("T")


class SyncBridge(BaseCheckpointSaver[str]):
    """Base giving an async saver its sync API (subclasses set `loop`, implement the a-methods)."""

    loop: asyncio.AbstractEventLoop | None

    def _call(self, what: str, coro: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or (running is not None and running is loop):
            coro.close()
            if loop is None:
                raise asyncio.InvalidStateError(
                    "SQLSaver has no event loop yet: create it inside a running loop (or call "
                    "one of its async methods first) before using its synchronous methods."
                )
            raise asyncio.InvalidStateError(
                f"Synchronous calls to SQLSaver are only allowed from a different thread. "
                f"From the event loop thread, use the async interface, e.g. `await "
                f"checkpointer.a{what}(...)` or `await graph.ainvoke(...)`."
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Sync `aget_tuple` (from a thread other than the saver's loop)."""
        return self._call("get_tuple", self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync `alist`, one checkpoint at a time."""
        aiter_: AsyncIterator[CheckpointTuple] = self.alist(
            config, filter=filter, before=before, limit=limit
        )
        while True:
            try:
                yield self._call("list", _anext(aiter_))
            except StopAsyncIteration:
                break

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Sync `aput`."""
        return self._call(
            "put",
            self.aput(config, checkpoint, metadata, new_versions),
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync `aput_writes`."""
        self._call(
            "put_writes",
            self.aput_writes(config, writes, task_id, task_path),
        )

    def delete_thread(self, thread_id: str) -> None:
        """Sync `adelete_thread`."""
        self._call("delete_thread", self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Sync `adelete_for_runs`."""
        self._call("delete_for_runs", self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Sync `acopy_thread`."""
        self._call(
            "copy_thread",
            self.acopy_thread(source_thread_id, target_thread_id),
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Sync `aprune`."""
        self._call("prune", self.aprune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Sync `aget_delta_channel_history`."""
        return self._call(
            "get_delta_channel_history",
            self.aget_delta_channel_history(config=config, channels=channels),
        )


async def _anext(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()

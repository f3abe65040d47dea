"""Deleting runs, copying and pruning threads without breaking DeltaChannel history.

A `DeltaChannel` stores no value at most checkpoints: its state is the nearest ancestor's
stored value (a `_DeltaSnapshot`) plus the writes of every checkpoint in between. So a
checkpoint "needs", per delta channel, its ancestors up to and including the first one that
stores the channel. These helpers work from the threads' structure only (ids, parents,
`value_versions`, metadata), never decoding state; the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.checkpoint import queries
from app.checkpoint.codec import INLINE, check_text
from app.checkpoint.errors import DeltaHistoryConflict, InvalidCheckpointInput, ThreadHasCheckpoints
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints

_CHUNK = 500  # ids per IN list


class _Namespace:
    """The checkpoints of one (thread, namespace)."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self.parent: dict[str, str | None] = {}
        self.values: dict[str, Mapping[str, str]] = {}
        self.run: dict[str, str | None] = {}
        self.delta_channels: set[str] = set()
        for row in rows:
            self.parent[row.checkpoint_id] = row.parent_checkpoint_id
            self.values[row.checkpoint_id] = row.value_versions or {}
            self.run[row.checkpoint_id] = row.run_id
            counters = (row.metadata or {}).get("counters_since_delta_snapshot") or {}
            self.delta_channels.update(counters)

    def delta_chain(self, checkpoint_id: str) -> set[str]:
        """Ancestors whose writes or stored value rebuild `checkpoint_id`'s delta channels."""
        needed: set[str] = set()
        for channel in self.delta_channels:
            if channel in self.values.get(checkpoint_id, {}):
                continue
            seen: set[str] = set()
            current = self.parent.get(checkpoint_id)
            while current is not None and current in self.parent and current not in seen:
                seen.add(current)
                if channel in self.values[current]:
                    break
                current = self.parent[current]
            needed |= seen
        return needed

    def broken_by(self, doomed: set[str]) -> bool:
        """Whether some checkpoint outside `doomed` rebuilds a delta channel through it."""
        for channel in self.delta_channels:
            verdict: dict[str, bool] = {}  # ancestor -> its walk hits `doomed` first
            for survivor in self.parent:
                if survivor in doomed or channel in self.values[survivor]:
                    continue
                path: dict[str, None] = {}  # ordered set
                current = self.parent[survivor]
                hit = False
                while current is not None and current not in path:
                    if current in verdict:
                        hit = verdict[current]
                        break
                    if current in doomed:
                        hit = True
                        break
                    if current not in self.parent or channel in self.values[current]:
                        break
                    path[current] = None
                    current = self.parent[current]
                for visited in path:
                    verdict[visited] = hit
                if hit:
                    return True
        return False

    def blob_refs(self, ids: Iterable[str]) -> set[tuple[str, str]]:
        return {
            (channel, version)
            for cid in ids
            for channel, version in self.values[cid].items()
            if version != INLINE
        }


async def _load(
    conn: AsyncConnection, tenant_id: str, thread_ids: Sequence[str]
) -> dict[tuple[str, str], _Namespace]:
    rows: dict[tuple[str, str], list[Any]] = {}
    for start in range(0, len(thread_ids), _CHUNK):
        result = await conn.execute(
            queries.select_thread_headers(tenant_id, thread_ids[start : start + _CHUNK])
        )
        for row in result:
            rows.setdefault((row.thread_id, row.checkpoint_ns), []).append(row)
    return {key: _Namespace(members) for key, members in rows.items()}


async def _delete(
    conn: AsyncConnection,
    tenant_id: str,
    thread_id: str,
    namespace: str,
    space: _Namespace,
    doomed: set[str],
) -> None:
    """Delete `doomed` checkpoints, their writes, and blobs no kept checkpoint references."""
    ordered = sorted(doomed)
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        for table in (checkpoint_writes, checkpoints):
            await conn.execute(
                queries.delete_checkpoints(table, tenant_id, thread_id, namespace, chunk)
            )
    kept = [cid for cid in space.parent if cid not in doomed]
    garbage = space.blob_refs(doomed) - space.blob_refs(kept)
    by_channel: dict[str, list[str]] = {}
    for channel, version in garbage:
        by_channel.setdefault(channel, []).append(version)
    for channel, versions in by_channel.items():
        for start in range(0, len(versions), _CHUNK):
            await conn.execute(
                queries.delete_blobs(
                    tenant_id, thread_id, namespace, channel, versions[start : start + _CHUNK]
                )
            )


async def delete_for_runs(conn: AsyncConnection, tenant_id: str, run_ids: Sequence[str]) -> None:
    """Delete the runs' checkpoints, unless that breaks a surviving delta history."""
    wanted = set(run_ids)
    threads: list[str] = []
    for start in range(0, len(run_ids), _CHUNK):
        result = await conn.execute(
            queries.select_run_threads(tenant_id, run_ids[start : start + _CHUNK])
        )
        threads.extend(row.thread_id for row in result)
    spaces = await _load(conn, tenant_id, sorted(set(threads)))
    plan = []
    for (thread_id, namespace), space in spaces.items():
        doomed = {cid for cid, run in space.run.items() if run in wanted}
        if not doomed:
            continue
        if space.broken_by(doomed):
            raise DeltaHistoryConflict(
                f"deleting these runs would break the DeltaChannel history of thread "
                f"{thread_id!r}: a later checkpoint rebuilds its state from their writes. "
                f"Delete the later runs too, or prune the thread first."
            )
        plan.append((thread_id, namespace, space, doomed))
    for thread_id, namespace, space, doomed in plan:
        await _delete(conn, tenant_id, thread_id, namespace, space, doomed)


async def copy_thread(conn: AsyncConnection, tenant_id: str, source: str, target: str) -> None:
    """Copy every checkpoint, blob and write of `source` (all namespaces) to `target`."""
    existing = await conn.scalar(queries.count_checkpoints(tenant_id, target))
    if existing:
        raise ThreadHasCheckpoints(f"thread {target!r} already has checkpoints")
    for table in (checkpoints, checkpoint_blobs, checkpoint_writes):
        await conn.execute(queries.copy_thread_rows(table, tenant_id, source, target))


async def keep_latest(conn: AsyncConnection, tenant_id: str, thread_id: str) -> None:
    """Keep each namespace's latest checkpoint and the ancestors its delta channels need."""
    spaces = await _load(conn, tenant_id, [thread_id])
    for (_, namespace), space in spaces.items():
        head = max(space.parent)
        kept = {head} | space.delta_chain(head)
        doomed = set(space.parent) - kept
        if not doomed:
            continue
        await _delete(conn, tenant_id, thread_id, namespace, space, doomed)
        orphans = [cid for cid in kept if space.parent[cid] in doomed]
        if orphans:
            await conn.execute(queries.detach_parents(tenant_id, thread_id, namespace, orphans))


class ThreadMaintenance:
    """The saver's deletes, copies and prunes (a base of `SQLSaver`): each runs in one
    transaction of `_writer()` (or the caller's), scoped to the saver's tenant."""

    tenant_id: str

    def _writer(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of a thread (all namespaces)."""
        async with self._writer() as conn:
            await self.adelete_threads_in(conn, [thread_id])

    async def adelete_threads_in(self, conn: AsyncConnection, thread_ids: Sequence[str]) -> None:
        """Delete every checkpoint, blob and write of these threads inside the caller's
        transaction `conn` (a thread row and its checkpoints go in one commit)."""
        if isinstance(thread_ids, str):
            raise InvalidCheckpointInput("thread_ids must be a sequence of thread ids")
        ids = [check_text(t, "thread_id") for t in thread_ids]
        if not ids:
            return
        for table in (checkpoints, checkpoint_blobs, checkpoint_writes):
            await conn.execute(queries.delete_threads(table, self.tenant_id, ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes, and blobs nobody else uses) of runs.

        Refuses (`DeltaHistoryConflict`, nothing deleted) when a surviving checkpoint's
        DeltaChannel history runs through a checkpoint of these runs: deleting it would
        silently empty that channel. Deleting a thread's newest runs (rollback) is always
        allowed, since nothing survives on top of them.
        """
        if isinstance(run_ids, str):
            raise InvalidCheckpointInput("run_ids must be a sequence of run ids")
        ids = [check_text(r, "run id") for r in run_ids]
        if not ids:
            return
        async with self._writer() as conn:
            await delete_for_runs(conn, self.tenant_id, ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history (every namespace, blob and write) to a new thread."""
        source = check_text(source_thread_id, "thread_id")
        target = check_text(target_thread_id, "thread_id")
        async with self._writer() as conn:
            await copy_thread(conn, self.tenant_id, source, target)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`delete` removes the threads' checkpoints; `keep_latest` keeps each namespace's
        latest checkpoint plus every ancestor its DeltaChannels need (back to the nearest
        stored value), so pruned threads reconstruct exactly."""
        if isinstance(thread_ids, str):
            raise InvalidCheckpointInput("thread_ids must be a sequence of thread ids")
        if strategy not in ("keep_latest", "delete"):
            raise InvalidCheckpointInput(f"unknown prune strategy {strategy!r}")
        ids = [check_text(t, "thread_id") for t in thread_ids]
        if not ids:
            return
        if strategy == "delete":
            async with self._writer() as conn:
                for table in (checkpoints, checkpoint_blobs, checkpoint_writes):
                    await conn.execute(queries.delete_threads(table, self.tenant_id, ids))
            return
        for thread_id in ids:
            async with self._writer() as conn:
                await keep_latest(conn, self.tenant_id, thread_id)

"""`SQLSaver`: a durable, tenant-scoped LangGraph checkpointer on SQLAlchemy async Core.

Runs on PostgreSQL (asyncpg) and SQLite (aiosqlite) through the engine's pool, without any
saver-wide lock, so concurrent threads scale with the pool. On PostgreSQL a put is one
statement (the new channel blobs ride in a CTE) run in autocommit; reads skip BEGIN/ROLLBACK.
Get is a primary-key probe (or the first row of a backward index scan for "latest") plus one
statement fetching exactly the blobs that checkpoint references and its pending writes.
Put, put_writes and get run pre-compiled on the pooled driver connection (direct.py): one
round trip on PostgreSQL, one worker-thread hop on SQLite.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.checkpoint import codec, delta, maintenance, queries
from app.checkpoint.bridge import SyncBridge
from app.checkpoint.codec import check_text
from app.checkpoint.errors import InvalidCheckpointInput
from app.checkpoint.serde import make_serde
from app.db import migrate
from app.db.dialect import reader, single_statement_autocommit
from app.db.direct import DirectStatement, fast_executor
from app.db.engine import create_engine
from app.db.executor import Executor
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from app.db.types import utcnow

_LIST_PAGE = 100  # checkpoints decoded per values-and-writes round trip in `alist`
_OFFLOAD_BYTES = 256 * 1024  # decode bigger results in a worker thread, off the event loop
_CHECKPOINT_ID_MAX = 64


class SQLSaver(SyncBridge):
    """Checkpointer for PostgreSQL and SQLite; every query filters on `tenant_id`."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant_id: str = "default",
        serde: SerializerProtocol | None = None,
        executor: Executor | None = None,
    ) -> None:
        """`executor`: what put, put_writes, get and one-page lists run on (the server passes
        its one fast-path executor, `AppState.direct`; None: the saver's own)."""
        super().__init__(serde=serde or make_serde(None))
        self.engine = engine
        self.tenant_id = check_text(tenant_id, "tenant_id")
        self._one_statement = single_statement_autocommit(engine.dialect)
        # Reads (and PostgreSQL's single-statement writes) skip BEGIN/COMMIT round trips and,
        # on SQLite, the write lock.
        self._autocommit = reader(engine)
        # put, put_writes and get skip SQLAlchemy's per-execute work (direct.py); on
        # PostgreSQL a put's new blobs ride in the checkpoint statement
        self._direct: Executor = executor or fast_executor(engine)
        dialect = engine.dialect
        prepare = self._direct.prepare
        self._put = prepare(queries.upsert_checkpoint(dialect, with_blobs=self._one_statement))
        self._blob_insert = prepare(queries.upsert_blobs(dialect))
        self._writes_insert = prepare(queries.insert_writes(dialect))
        self._get_by_id = prepare(queries.select_tuple(dialect, by_id=True))
        self._get_latest = prepare(queries.select_tuple(dialect, by_id=False))
        self._history_statements: dict[tuple[int, bool], Any] = {}
        # set on views made by aprefetch_tuple / aprefetch_list: (call key, result), used once
        self._prefetched_get: tuple[Any, CheckpointTuple | None] | None = None
        self._prefetched_list: tuple[Any, list[CheckpointTuple]] | None = None
        # get/list statements with a caller's guard query riding along: (guard, statement)
        self._guarded: dict[tuple[str, bool, int], tuple[Select[Any], DirectStatement]] = {}
        self._list_page = queries.select_page(dialect)
        # `list` of one thread's newest checkpoints (history): one pre-compiled statement
        self._list_latest = prepare(queries.select_list(dialect, before=False))
        self._list_before = prepare(queries.select_list(dialect, before=True))
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    # ----------------------------------------------------------------- construction

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str,
        *,
        tenant_id: str = "default",
        serde: SerializerProtocol | None = None,
        encryption_key: str | None = None,
        pool_size: int = 10,
        max_overflow: int = 10,
    ) -> AsyncIterator[SQLSaver]:
        """`async with SQLSaver.from_url(url) as saver`: a saver owning its own engine."""
        engine = create_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        try:
            yield cls(
                engine,
                tenant_id=tenant_id,
                serde=serde if serde is not None else make_serde(encryption_key),
            )
        finally:
            await engine.dispose()

    async def setup(self) -> None:
        """Bring the database schema to head (Alembic). Idempotent."""
        await migrate.upgrade(self.engine)

    def for_tenant(self, tenant_id: str) -> SQLSaver:
        """A view of this saver for another tenant (same engine, serializer and loop)."""
        view = copy.copy(self)
        view.tenant_id = check_text(tenant_id, "tenant_id")
        return view

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random suffix: ordered, and unique across forks."""
        import random

        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # ----------------------------------------------------------------- connections

    def _ensure_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()

    def _reader(self) -> AbstractAsyncContextManager[AsyncConnection]:
        self._ensure_loop()
        return self._autocommit.connect()

    def _writer(self) -> AbstractAsyncContextManager[AsyncConnection]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        return self.engine.begin()

    def _thread_key(self, config: RunnableConfig) -> dict[str, str]:
        conf = config.get("configurable") or {}
        return {
            "tenant_id": self.tenant_id,
            "thread_id": check_text(conf.get("thread_id"), "thread_id"),
            "checkpoint_ns": check_text(conf.get("checkpoint_ns") or "", "checkpoint_ns"),
        }

    # ----------------------------------------------------------------- put

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel values whose version moved, atomically."""
        started = time.perf_counter()
        key = self._thread_key(config)
        checkpoint_id = check_text(checkpoint["id"], "checkpoint id", _CHECKPOINT_ID_MAX)
        parent_id = (config.get("configurable") or {}).get("checkpoint_id")
        if parent_id is not None:
            check_text(parent_id, "parent checkpoint id", _CHECKPOINT_ID_MAX)
        type_tag, body, value_versions, blobs = codec.encode_checkpoint(
            self.serde, checkpoint, new_versions
        )
        meta = codec.json_safe(get_serializable_checkpoint_metadata(config, metadata))
        run_id = meta.get("run_id")
        row = {
            **key,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent_id,
            "run_id": str(run_id)[:_CHECKPOINT_ID_MAX] if run_id is not None else None,
            "type": type_tag,
            "checkpoint": body,
            "metadata": meta,
            "value_versions": value_versions,
            "created_at": utcnow(),
        }
        blob_rows = [
            {**key, "channel": channel, "version": version, "type": t, "blob": data}
            for channel, (version, (t, data)) in blobs.items()
        ]
        self._ensure_loop()
        await self._store_checkpoint(key, row, blob_rows)
        size = len(body) + sum(len(r["blob"] or b"") for r in blob_rows)
        metrics.observe_checkpoint_put(time.perf_counter() - started, size)
        return {
            "configurable": {
                "thread_id": key["thread_id"],
                "checkpoint_ns": key["checkpoint_ns"],
                "checkpoint_id": checkpoint_id,
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for a checkpoint (special writes replace)."""
        started = time.perf_counter()
        key = self._thread_key(config)
        checkpoint_id = check_text(
            (config.get("configurable") or {}).get("checkpoint_id"),
            "checkpoint id",
            _CHECKPOINT_ID_MAX,
        )
        rows = codec.encode_writes(
            self.serde,
            {**key, "checkpoint_id": checkpoint_id},
            writes,
            check_text(task_id, "task_id"),
            task_path,
        )
        if not rows:
            return
        self._ensure_loop()
        await self._store_writes(rows)
        metrics.observe_checkpoint_writes(time.perf_counter() - started)

    # The two statements every graph write comes down to; a run's fenced view
    # (app/runs/fenced_saver.py) makes them conditional on the run attempt owning its run.

    async def _store_checkpoint(
        self, key: dict[str, str], row: dict[str, Any], blob_rows: list[dict[str, Any]]
    ) -> None:
        if self._one_statement:
            params = {**row, **queries.blob_params(key, blob_rows)}
            await self._direct.write((self._put, [params]))
        else:
            await self._direct.write((self._blob_insert, blob_rows), (self._put, [row]))

    async def _store_writes(self, rows: list[dict[str, Any]]) -> None:
        await self._direct.write((self._writes_insert, rows))

    # ----------------------------------------------------------------- get / list

    # ----------------------------------------------------------------- prefetch

    def _get_call(self, config: RunnableConfig) -> tuple[Any, ...]:
        key = self._thread_key(config)
        return (key["tenant_id"], key["thread_id"], key["checkpoint_ns"], get_checkpoint_id(config))

    def _list_call(
        self, config: RunnableConfig, before: RunnableConfig | None, limit: int | None
    ) -> tuple[Any, ...]:
        conf = config.get("configurable") or {}
        return (
            self.tenant_id,
            conf.get("thread_id"),
            conf.get("checkpoint_ns"),
            conf.get("checkpoint_id"),
            get_checkpoint_id(before) if before else None,
            limit,
        )

    def _with_guard(self, kind: str, flag: bool, guard: Select[Any]) -> DirectStatement:
        """The get (`flag`: by id) or one-page list (`flag`: before) statement with `guard`'s
        rows in the same union, compiled once per guard query."""
        key = (kind, flag, id(guard))
        found = self._guarded.get(key)
        if found is None or found[0] is not guard:
            dialect = self.engine.dialect
            statement = (
                queries.select_tuple(dialect, by_id=flag, guard=guard)
                if kind == "get"
                else queries.select_list(dialect, before=flag, guard=guard)
            )
            found = self._guarded[key] = (guard, self._direct.prepare(statement))
        return found[1]

    async def aprefetch_tuple(
        self, config: RunnableConfig, *, guard: Select[Any] | None = None
    ) -> tuple[SQLSaver, list[Any]]:
        """A view of this saver whose next `aget_tuple` for the same checkpoint answers from a
        read made now (served once: LangGraph updates the tuple it gets), and the values of
        `guard`'s rows read in the same statement (see `queries.guard_rows`): a caller gets
        its own row (the thread's) and the checkpoint in one round trip."""
        found, guarded = await self._read_tuple(config, guard)
        view = copy.copy(self)
        view._prefetched_get = (self._get_call(config), found)
        return view, guarded

    async def aprefetch_list(
        self,
        config: RunnableConfig,
        *,
        before: RunnableConfig | None,
        limit: int | None,
        guard: Select[Any] | None = None,
    ) -> tuple[SQLSaver, list[Any] | None]:
        """As `aprefetch_tuple`, for the next `alist` with the same arguments (no filter).
        `guard`'s values come back when the list was one statement (a thread and namespace,
        a limit up to a page); else None, and the caller reads its row itself."""
        guarded: list[Any] | None = None
        page = self._one_page(config, {}, before, limit)
        if page is not None and guard is not None:
            found, guarded = await self._list_one_page(*page, guard=guard)
        else:
            found = [tup async for tup in self.alist(config, before=before, limit=limit)]
        view = copy.copy(self)
        view._prefetched_list = (self._list_call(config, before, limit), found)
        return view, guarded

    # ----------------------------------------------------------------- get / list

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """One checkpoint by id (None if unknown), or the thread's latest: one statement."""
        if self._prefetched_get is not None:
            call, found = self._prefetched_get
            if call == self._get_call(config):
                self._prefetched_get = None
                return found
        return (await self._read_tuple(config))[0]

    async def _read_tuple(
        self, config: RunnableConfig, guard: Select[Any] | None = None
    ) -> tuple[CheckpointTuple | None, list[Any]]:
        params: dict[str, Any] = self._thread_key(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is not None:
            params["checkpoint_id"] = check_text(checkpoint_id, "checkpoint id", _CHECKPOINT_ID_MAX)
        if guard is not None:
            query = self._with_guard("get", checkpoint_id is not None, guard)
        else:
            query = self._get_latest if checkpoint_id is None else self._get_by_id
        self._ensure_loop()
        rows = await self._direct.fetch(query, params)
        guarded = [r.metadata for r in rows if r.kind == queries.KIND_GUARD]
        header = next((r for r in rows if r.kind == "h"), None)
        if header is None:
            return None, guarded
        head = _Header(params["thread_id"], params["checkpoint_ns"], header)
        blobs = {(r.channel, r.key): (r.type, r.blob) for r in rows if r.kind == queries.KIND_VALUE}
        writes = [
            (r.key, r.channel, r.task_path or "", r.idx, r.type, r.blob)
            for r in rows
            if r.kind == queries.KIND_WRITE
        ]
        size = sum(len(r.blob or b"") for r in rows)
        if size > _OFFLOAD_BYTES:
            return await asyncio.to_thread(self._tuple_from, head, blobs, writes), guarded
        return self._tuple_from(head, blobs, writes), guarded

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first, filtered by thread / namespace / metadata / before."""
        if self._prefetched_list is not None and config is not None and not filter:
            call, found = self._prefetched_list
            if call == self._list_call(config, before, limit):
                self._prefetched_list = None
                for tup in found:
                    yield tup
                return
        page = self._one_page(config, filter, before, limit)
        if page is not None:
            for tup in (await self._list_one_page(*page))[0]:
                yield tup
            return
        conf = (config or {}).get("configurable") or {}
        thread_id = check_text(conf["thread_id"], "thread_id") if "thread_id" in conf else None
        ns = conf.get("checkpoint_ns")
        checkpoint_id = conf.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        stmt = queries.select_checkpoints(
            self.engine.dialect,
            self.tenant_id,
            thread_id=thread_id,
            checkpoint_ns=check_text(ns, "checkpoint_ns") if ns is not None else None,
            checkpoint_id=checkpoint_id,
            metadata_filter=filter,
            before_id=before_id,
            limit=limit,
        )
        async with self._reader() as conn:
            headers = (await conn.execute(stmt)).all()
        for start in range(0, len(headers), _LIST_PAGE):
            page = headers[start : start + _LIST_PAGE]
            groups: dict[tuple[str, str], list[Any]] = {}
            for header in page:
                groups.setdefault((header.thread_id, header.checkpoint_ns), []).append(header)
            rows: list[Any] = []
            async with self._reader() as conn:
                for (thread, namespace), members in groups.items():
                    key = {
                        "tenant_id": self.tenant_id,
                        "thread_id": thread,
                        "checkpoint_ns": namespace,
                    }
                    rows.extend(
                        (thread, namespace, r)
                        for r in await self._values_and_writes(conn, key, members)
                    )
            for tup in await self._decode(page, rows):
                yield tup

    def _one_page(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> tuple[str, str, str | None, int] | None:
        """(thread, namespace, before id, limit) when `alist` is the one-statement kind: one
        thread and namespace, no checkpoint id, no metadata filter, a limit up to a page."""
        conf = (config or {}).get("configurable") or {}
        ns = conf.get("checkpoint_ns")
        if (
            "thread_id" not in conf
            or ns is None
            or conf.get("checkpoint_id")
            or filter
            or limit is None
            or not 0 < limit <= _LIST_PAGE
        ):
            return None
        before_id = get_checkpoint_id(before) if before else None
        return (
            check_text(conf["thread_id"], "thread_id"),
            check_text(ns, "checkpoint_ns"),
            before_id,
            limit,
        )

    async def _list_one_page(
        self,
        thread_id: str,
        checkpoint_ns: str,
        before_id: str | None,
        limit: int,
        guard: Select[Any] | None = None,
    ) -> tuple[list[CheckpointTuple], list[Any]]:
        """A thread's newest `limit` checkpoints (older than `before_id`), and `guard`'s
        values: one statement."""
        params: dict[str, Any] = {
            "tenant_id": self.tenant_id,
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "limit": limit,
        }
        if before_id is not None:
            params["before_id"] = check_text(before_id, "checkpoint id", _CHECKPOINT_ID_MAX)
        if guard is not None:
            query = self._with_guard("list", before_id is not None, guard)
        else:
            query = self._list_latest if before_id is None else self._list_before
        self._ensure_loop()
        rows = await self._direct.fetch(query, params)
        guarded = [r.metadata for r in rows if r.kind == queries.KIND_GUARD]
        if sum(len(r.blob or b"") for r in rows) > _OFFLOAD_BYTES:
            found = await asyncio.to_thread(self._page_tuples, thread_id, checkpoint_ns, rows)
        else:
            found = self._page_tuples(thread_id, checkpoint_ns, rows)
        return found, guarded

    def _page_tuples(
        self, thread_id: str, checkpoint_ns: str, rows: Sequence[Any]
    ) -> list[CheckpointTuple]:
        headers: list[Any] = []
        blobs: dict[tuple[str, str], tuple[str, bytes | None]] = {}
        writes: dict[str, list[Any]] = {}
        for r in rows:
            if r.kind == queries.KIND_VALUE:
                blobs[(r.channel, r.key)] = (r.type, r.blob)
            elif r.kind == queries.KIND_WRITE:
                writes.setdefault(r.checkpoint_id, []).append(
                    (r.key, r.channel, r.task_path or "", r.idx, r.type, r.blob)
                )
            elif r.kind == "h":
                headers.append(r)
        headers.sort(key=lambda h: h.idx)
        result = []
        for h in headers:
            mine = {
                (channel, version): blobs[(channel, version)]
                for channel, version in (h.value_versions or {}).items()
                if (channel, version) in blobs
            }
            head = _Header(thread_id, checkpoint_ns, h)
            result.append(self._tuple_from(head, mine, writes.get(h.checkpoint_id, [])))
        return result

    async def _values_and_writes(
        self, conn: AsyncConnection, key: Mapping[str, str], headers: Sequence[Any]
    ) -> list[Any]:
        """Blobs and writes of `headers` (one thread and namespace, sorted newest first)."""
        params = {**key, "lo": headers[-1].checkpoint_id, "hi": headers[0].checkpoint_id}
        return list((await conn.execute(self._list_page, params)).all())

    async def _decode(self, headers: Sequence[Any], rows: Sequence[Any]) -> list[CheckpointTuple]:
        """Decode a page of `alist`; rows are (thread_id, checkpoint_ns, row)."""
        size = sum(len(h.checkpoint) for h in headers)
        size += sum(len(r[2].blob or b"") for r in rows)
        if size > _OFFLOAD_BYTES:
            return await asyncio.to_thread(self._build_tuples, headers, rows)
        return self._build_tuples(headers, rows)

    def _build_tuples(self, headers: Sequence[Any], rows: Sequence[Any]) -> list[CheckpointTuple]:
        blobs: dict[tuple[str, str, str, str], tuple[str, bytes | None]] = {}
        writes: dict[tuple[str, str, str], list[Any]] = {}
        for thread, namespace, row in rows:
            if row.kind == queries.KIND_VALUE:
                blobs[(thread, namespace, row.channel, row.key)] = (row.type, row.blob)
            else:
                checkpoint_id, task_id = row.key.split("|", 1)
                writes.setdefault((thread, namespace, checkpoint_id), []).append(
                    (task_id, row.channel, row.task_path or "", row.idx, row.type, row.blob)
                )
        result = []
        for header in headers:
            thread, namespace = header.thread_id, header.checkpoint_ns
            mine = {
                (channel, version): blobs[(thread, namespace, channel, version)]
                for channel, version in (header.value_versions or {}).items()
                if (thread, namespace, channel, version) in blobs
            }
            pending = writes.get((thread, namespace, header.checkpoint_id), [])
            result.append(self._tuple_from(header, mine, pending))
        return result

    def _tuple_from(
        self,
        header: Any,
        blobs: Mapping[tuple[str, str], tuple[str, bytes | None]],
        writes: Sequence[tuple[str, str, str, int, str, bytes | None]],
    ) -> CheckpointTuple:
        checkpoint = codec.decode_checkpoint(
            self.serde, header.type, header.checkpoint, header.value_versions or {}, blobs
        )
        conf = {"thread_id": header.thread_id, "checkpoint_ns": header.checkpoint_ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": header.checkpoint_id}},
            checkpoint=checkpoint,
            metadata=header.metadata,
            parent_config=(
                {"configurable": {**conf, "checkpoint_id": header.parent_checkpoint_id}}
                if header.parent_checkpoint_id
                else None
            ),
            pending_writes=codec.decode_writes(self.serde, writes),
        )

    # ----------------------------------------------------------------- delta history

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per-channel writes and seed along the parent chain, in one recursive query."""
        if not channels:
            return {}
        channels = list(channels)
        key = self._thread_key(config)
        checkpoint_id = get_checkpoint_id(config)
        shape = (len(channels), checkpoint_id is not None)
        stmt = self._history_statements.get(shape)
        if stmt is None:
            stmt = delta.build_history_query(shape[0], by_id=shape[1])
            self._history_statements[shape] = stmt
        params = delta.history_params(
            self.tenant_id, key["thread_id"], key["checkpoint_ns"], checkpoint_id, channels
        )
        async with self._reader() as conn:
            rows = (await conn.execute(stmt, params)).all()

        def loads(type_tag: str, data: bytes) -> Any:
            return codec.loads(self.serde, type_tag, data)

        if sum(len(r.blob or b"") for r in rows) > _OFFLOAD_BYTES:
            return await asyncio.to_thread(delta.assemble_history, channels, rows, loads)
        return delta.assemble_history(channels, rows, loads)

    # ----------------------------------------------------------------- deletes, copy, prune

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
            await maintenance.delete_for_runs(conn, self.tenant_id, ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history (every namespace, blob and write) to a new thread."""
        source = check_text(source_thread_id, "thread_id")
        target = check_text(target_thread_id, "thread_id")
        async with self._writer() as conn:
            await maintenance.copy_thread(conn, self.tenant_id, source, target)

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
                await maintenance.keep_latest(conn, self.tenant_id, thread_id)


class _Header:
    """The checkpoint row of `select_tuple`'s result, shaped like a `select_checkpoints` row."""

    def __init__(self, thread_id: str, checkpoint_ns: str, row: Any) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id: str = row.checkpoint_id
        self.parent_checkpoint_id: str | None = row.parent_checkpoint_id
        self.type: str = row.type
        self.checkpoint: bytes = row.blob
        self.metadata: Any = row.metadata
        self.value_versions: Any = row.value_versions

"""The read path of `SQLSaver`: get, list, the server's prefetched views, delta history.

Get is a primary-key probe (or the first row of a backward index scan for "latest") plus
exactly the blobs that checkpoint references and its pending writes, in one statement
(`tuple_queries.select_tuple`); the common list (one thread, a limit up to a page) is one
statement too. Both run pre-compiled on the fast-path executor; other lists (metadata filter,
across threads) page through SQLAlchemy Core. `tuple_rows` decodes the rows.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ClauseElement

from app.checkpoint import codec, delta, delta_queries, tuple_queries, tuple_rows
from app.checkpoint.codec import check_text
from app.db.direct_statement import DirectStatement
from app.db.executor import Executor

_LIST_PAGE = 100  # checkpoints decoded per values-and-writes round trip in `alist`
_T = TypeVar("_T")
_OFFLOAD_BYTES = 256 * 1024  # decode bigger results in a worker thread, off the event loop


async def _decoded(size: int, decode: Callable[..., _T], *args: Any) -> _T:
    """`decode(*args)`, in a worker thread when the `size` bytes it decodes are many."""
    if size > _OFFLOAD_BYTES:
        return await asyncio.to_thread(decode, *args)
    return decode(*args)


_CHECKPOINT_ID_MAX = 64  # longest checkpoint id (and stored run id) accepted


class CheckpointReads:
    """Get / list / prefetch / delta history for `SQLSaver` (its base; the saver supplies
    the engine, tenant, serializer, executor and connection helpers)."""

    engine: AsyncEngine
    tenant_id: str
    serde: SerializerProtocol
    _direct: Executor

    def _ensure_loop(self) -> None:
        raise NotImplementedError

    def _reader(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _thread_key(self, config: RunnableConfig) -> dict[str, str]:
        raise NotImplementedError

    def _key_statement(self, statement: ClauseElement) -> DirectStatement:
        raise NotImplementedError

    def _prepare_reads(self) -> None:
        """Build the read statements once (pre-compiled where they run on `_direct`)."""
        dialect = self.engine.dialect
        prepare = self._direct.prepare
        # the per-run gets: see SQLSaver._key_statement
        self._get_by_id = self._key_statement(tuple_queries.select_tuple(dialect, by_id=True))
        self._get_latest = self._key_statement(tuple_queries.select_tuple(dialect, by_id=False))
        self._history_statements: dict[tuple[int, bool], Any] = {}
        # set on views made by aprefetch_tuple / aprefetch_list: (call key, result), used once
        self._prefetched_get: tuple[Any, CheckpointTuple | None] | None = None
        self._prefetched_list: tuple[Any, list[CheckpointTuple]] | None = None
        # get/list statements with a caller's guard query riding along: (guard, statement)
        self._guarded: dict[tuple[str, bool, int], tuple[Select[Any], DirectStatement]] = {}
        self._list_page = tuple_queries.select_page(dialect)
        # `list` of one thread's newest checkpoints (history): one pre-compiled statement
        self._list_latest = prepare(tuple_queries.select_list(dialect, before=False))
        self._list_before = prepare(tuple_queries.select_list(dialect, before=True))

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
                tuple_queries.select_tuple(dialect, by_id=flag, guard=guard)
                if kind == "get"
                else tuple_queries.select_list(dialect, before=flag, guard=guard)
            )
            # a get is a key probe (see SQLSaver._key_statement), a list a range
            prepare = self._key_statement if kind == "get" else self._direct.prepare
            found = self._guarded[key] = (guard, prepare(statement))
        return found[1]

    async def aprefetch_tuple(
        self, config: RunnableConfig, *, guard: Select[Any] | None = None
    ) -> tuple[Self, list[Any]]:
        """A view of this saver whose next `aget_tuple` for the same checkpoint answers from a
        read made now (served once: LangGraph updates the tuple it gets), and the values of
        `guard`'s rows read in the same statement (see `tuple_queries.guard_rows`): a caller gets
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
    ) -> tuple[Self, list[Any] | None]:
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
        thread_id, checkpoint_ns = params["thread_id"], params["checkpoint_ns"]
        found = await _decoded(
            tuple_rows.blob_bytes(rows),
            tuple_rows.get_tuple,
            self.serde,
            thread_id,
            checkpoint_ns,
            rows,
        )
        return found, tuple_rows.guard_values(rows)

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
        stmt = tuple_queries.select_checkpoints(
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
        found = await _decoded(
            tuple_rows.blob_bytes(rows),
            tuple_rows.page_tuples,
            self.serde,
            thread_id,
            checkpoint_ns,
            rows,
        )
        return found, tuple_rows.guard_values(rows)

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
        return await _decoded(size, tuple_rows.build_tuples, self.serde, headers, rows)

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
            stmt = delta_queries.build_history_query(shape[0], by_id=shape[1])
            self._history_statements[shape] = stmt
        params = delta_queries.history_params(
            self.tenant_id, key["thread_id"], key["checkpoint_ns"], checkpoint_id, channels
        )
        async with self._reader() as conn:
            rows = (await conn.execute(stmt, params)).all()

        def loads(type_tag: str, data: bytes) -> Any:
            return codec.loads(self.serde, type_tag, data)

        size = sum(len(blob or b"") for *_, blob in rows)  # the last column (HISTORY_COLUMNS)
        return await _decoded(size, delta.assemble_history, channels, rows, loads)

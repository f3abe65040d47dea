"""`SQLSaver`: a durable, tenant-scoped LangGraph checkpointer on SQLAlchemy async Core.

Runs on PostgreSQL (asyncpg) and SQLite (aiosqlite) through the engine's pool, without any
saver-wide lock, so concurrent threads scale with the pool. On PostgreSQL a put is one
statement (the new channel blobs ride in a CTE) run in autocommit; reads skip BEGIN/ROLLBACK.
Get is a primary-key probe (or the first row of a backward index scan for "latest") plus one
statement fetching exactly the blobs that checkpoint references and its pending writes.
Put, put_writes and get run pre-compiled on the pooled driver connection (direct.py): one
round trip on PostgreSQL, one worker-thread hop on SQLite.

This module holds construction and the write path; the read path (get, list, prefetch,
delta history) is `reads.CheckpointReads`, deletes / copies / prunes are
`maintenance.ThreadMaintenance`, and the sync API is `bridge.SyncBridge`.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ClauseElement

from app import metrics
from app.checkpoint import codec, queries
from app.checkpoint.bridge import SyncBridge
from app.checkpoint.codec import check_text
from app.checkpoint.maintenance import ThreadMaintenance
from app.checkpoint.reads import CheckpointReads
from app.checkpoint.serde import make_serde
from app.db import migrate
from app.db.access import read, transaction
from app.db.dialect import single_statement_autocommit
from app.db.direct import fast_executor
from app.db.direct_statement import DirectStatement
from app.db.engine import create_engine
from app.db.executor import Executor
from app.db.types import utcnow

_CHECKPOINT_ID_MAX = 64  # longest checkpoint id (and stored run id) accepted


class SQLSaver(CheckpointReads, ThreadMaintenance, SyncBridge):
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
        # put, put_writes and get skip SQLAlchemy's per-execute work (direct.py); on
        # PostgreSQL a put's new blobs ride in the checkpoint statement
        self._direct: Executor = executor or fast_executor(engine)
        dialect = engine.dialect
        prepare = self._key_statement
        self._put = prepare(queries.upsert_checkpoint(dialect, with_blobs=self._one_statement))
        self._blob_insert = prepare(queries.upsert_blobs(dialect))
        self._writes_insert = prepare(queries.insert_writes(dialect))
        self._prepare_reads()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    def _key_statement(self, statement: ClauseElement) -> DirectStatement:
        """A per-run statement (a put, pending writes, a get by key), pre-compiled: it plans
        well without the fast path's generic-plan setting (app/db/direct.py GENERIC_PLANS), so
        it never pays that setting's round trips."""
        return self._direct.prepare(statement, session_settings=False)

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
        # no BEGIN/COMMIT round trips, no SQLite write lock
        self._ensure_loop()
        return read(self.engine)

    def _writer(self) -> AbstractAsyncContextManager[AsyncConnection]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        return transaction(self.engine)

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

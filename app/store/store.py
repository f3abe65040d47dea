"""SQLStore: langgraph's `BaseStore` on SQLAlchemy async Core (PostgreSQL and SQLite).

One `abatch` call: all ops are validated first (bad input changes nothing), embeddings are
computed before the database is touched, then reads run (gets in one query, one query per
search and per namespace listing), then TTL refreshes and writes (one upsert, the deletes,
vector replacement) as one atomic unit. Everything but semantic searches and the writes of
a store with an index runs pre-compiled on the pooled driver connection (app/store/
direct.py). As in langgraph's own stores, the reads of a batch see the store as it was
before the batch's writes; of several puts to one key in a batch the last wins.

Orders: a search without a query returns newest `updated_at` first, then key; with a query,
highest score first (then newest). `list_namespaces` sorts namespaces as tuples.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db import migrate
from app.db.access import read, transaction
from app.db.direct_statement import Step
from app.db.engine import create_engine
from app.db.executor import Executor, Units
from app.db.types import utcnow
from app.errors import InvalidInput
from app.store import pgvector, queries, reads
from app.store.config import StoreIndex, parse_index_config, parse_ttl_config
from app.store.maintenance import reindex_items, sweep
from app.store.shared import Clock, PgvectorMode, Shared
from app.store.validation import DEFAULT_MAX_VALUE_BYTES, join_namespace, validate_op
from app.store.vectors import embed_puts, embed_queries
from app.store.writes import direct_writes, refresh_rows, write_statements

# app/main.py names the pgvector setting's type through this module
__all__ = ["PgvectorMode", "SQLStore"]

log = logging.getLogger(__name__)
_query_ignored_noted: list[bool] = []


def _note_query_ignored() -> None:
    if not _query_ignored_noted:
        _query_ignored_noted.append(True)
        log.warning(
            "store search query ignored: no store.index is configured, so searches with a "
            "query return the prefix search (configure store.index for semantic search)"
        )


@dataclass
class _Batch:
    """The ops of one `abatch` call by kind, each with its index in the results."""

    gets: list[tuple[int, GetOp]] = field(default_factory=list)
    searches: list[tuple[int, SearchOp]] = field(default_factory=list)  # without a query
    semantic: list[tuple[int, SearchOp]] = field(default_factory=list)
    listings: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[str, str], PutOp] = field(default_factory=dict)  # the last put wins
    encoded: dict[tuple[str, str], str] = field(default_factory=dict)  # values as JSON text
    writes: list[Step] = field(default_factory=list)  # the puts as direct steps

    def add(self, i: int, op: Op, encoded: str | None) -> None:
        """`encoded`: a put's value as validated JSON text (`validate_op`)."""
        if isinstance(op, PutOp):
            ident = (join_namespace(op.namespace), op.key)
            self.puts[ident] = op
            if encoded is not None:
                self.encoded[ident] = encoded
        elif isinstance(op, GetOp):
            self.gets.append((i, op))
        elif isinstance(op, SearchOp):
            (self.searches if op.query is None else self.semantic).append((i, op))
        else:
            self.listings.append((i, op))


@contextmanager
def _namespace_errors() -> Iterator[None]:
    # BaseStore's helpers validate labels before abatch; report that as bad input too
    try:
        yield
    except InvalidNamespaceError as exc:
        raise InvalidInput(str(exc)) from exc


def _op_name(op: Op) -> str:
    """The metrics label of one op (a PutOp without a value is a delete)."""
    if isinstance(op, PutOp):
        return "put" if op.value is not None else "delete"
    if isinstance(op, GetOp):
        return "get"
    if isinstance(op, SearchOp):
        return "search"
    return "list_namespaces"


class SQLStore(BaseStore):
    """Long-term memory on the app's SQL database, bound to one tenant.

    `index` (langgraph's `IndexConfig` dict or a parsed `StoreIndex`) enables semantic search;
    `ttl` (langgraph's `TTLConfig`) sets the default TTL in minutes and refresh-on-read.
    `clock` is injectable for tests; `max_value_bytes` bounds one value's JSON size.
    """

    supports_ttl = True

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant_id: str = "default",
        index: StoreIndex | Mapping[str, Any] | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        pgvector: PgvectorMode = "auto",
        executor: Executor | None = None,
    ) -> None:
        """`executor`: what put, get, search without a query and list_namespaces run on (the
        server passes its one fast-path executor, `AppState.direct`; None: the store's own)."""
        parsed_index = (
            index if isinstance(index, StoreIndex) or index is None else parse_index_config(index)
        )
        parsed_ttl = parse_ttl_config(ttl) if ttl is not None else None
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if pgvector not in ("auto", "off"):
            raise InvalidInput("pgvector must be 'auto' or 'off'")
        self._shared = Shared(
            engine,
            parsed_index,
            parsed_ttl,
            clock or utcnow,
            max_value_bytes,
            loop,
            pgvector,
            executor=executor,
        )
        self.ttl_config = parsed_ttl
        self.tenant_id = _check_tenant(tenant_id)

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str,
        *,
        tenant_id: str = "default",
        index: StoreIndex | Mapping[str, Any] | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        pgvector: PgvectorMode = "auto",
    ) -> AsyncIterator[SQLStore]:
        """A store on its own engine (migrated to head), disposed on exit."""
        engine = create_engine(url)
        try:
            store = cls(
                engine,
                tenant_id=tenant_id,
                index=index,
                ttl=ttl,
                clock=clock,
                max_value_bytes=max_value_bytes,
                pgvector=pgvector,
            )
            await store.setup()
            yield store
        finally:
            await engine.dispose()

    @property
    def engine(self) -> AsyncEngine:
        return self._shared.engine

    @property
    def index(self) -> StoreIndex | None:
        """The semantic index, or None when semantic search is off."""
        return self._shared.index

    @property
    def uses_pgvector(self) -> bool | None:
        """Whether semantic queries run on pgvector (None: not detected yet)."""
        return self._shared.pgvector

    async def setup(self) -> None:
        """Bring the schema to head (the tables live in the Alembic history; idempotent).

        On PostgreSQL with the `vector` extension installed or available (and unless
        `pgvector="off"`), also create the pgvector column and the HNSW index for the
        index's dims (app/store/pgvector.py); semantic queries then run on them.
        """
        shared = self._shared
        shared.loop = asyncio.get_running_loop()
        await migrate.upgrade(shared.engine)
        if shared.pgvector_mode == "off":
            shared.pgvector = False
            return
        dims = shared.index.dims if shared.index is not None else None
        shared.pgvector = await pgvector.ensure(shared.engine, dims)

    def for_tenant(self, tenant_id: str) -> SQLStore:
        """A view of this store bound to another tenant (shares engine, index, TTL, clock)."""
        try:  # views are made where graphs run: remember the loop for the sync bridge
            self._shared.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        view: SQLStore = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.tenant_id = _check_tenant(tenant_id)
        return view

    # ------------------------------------------------------------------ batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Synchronous bridge: runs `abatch` on the store's event loop from another thread."""
        loop = self._shared.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and (loop is None or running is loop):
            raise asyncio.InvalidStateError(
                "Synchronous calls to SQLStore detected in the event loop; this would "
                "deadlock. Use the async methods there, e.g. `await store.aget(...)` instead "
                "of `store.get(...)`."
            )
        if loop is None or loop.is_closed():
            raise RuntimeError(
                "SQLStore's sync methods need the event loop the store runs on: create it "
                "(or call `await store.setup()`) inside that loop first."
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run every op of the batch (results in the order of `ops`).

        Gets, searches without a query, namespace listings and the writes of a store
        without an index run pre-compiled on one pooled driver connection (app/store/
        direct.py): the reads, then the TTL refreshes and writes as one atomic unit.
        Semantic searches and puts that write vectors go through SQLAlchemy
        (`reads.search_semantic`, `_write_with_vectors`).
        """
        started = time.perf_counter()
        shared = self._shared
        shared.loop = asyncio.get_running_loop()
        op_list = list(ops)
        max_value_bytes = shared.max_value_bytes
        batch = _Batch()
        for i, op in enumerate(op_list):  # everything is checked before anything runs
            batch.add(i, op, validate_op(op, max_value_bytes))
        puts = batch.puts
        if batch.semantic and shared.index is None:
            # As langgraph's own stores (InMemoryStore, PostgresStore): without `store.index`
            # a query is ignored and the search is the plain prefix/filter search (score
            # None), so a graph written against them runs unchanged. Said once per process.
            _note_query_ignored()
            batch.searches += batch.semantic
            batch.semantic = []
        query_vectors = await embed_queries(shared.index, [op for _, op in batch.semantic])
        put_vectors = await embed_puts(shared.index, puts)
        now = shared.clock()
        results: list[Result] = [None] * len(op_list)
        refresh: dict[tuple[str, str], datetime] = {}
        if batch.semantic:
            async with read(shared.engine) as conn:
                for i, search in batch.semantic:
                    results[i] = await reads.search_semantic(
                        shared, self.tenant_id, conn, search, now, query_vectors, refresh
                    )
        with_vectors = bool(puts) and shared.index is not None
        if not with_vectors:
            batch.writes = direct_writes(shared.direct, self.tenant_id, puts, batch.encoded, now)
        direct_work = batch.gets or batch.searches or batch.listings or batch.writes
        if direct_work or (refresh and not with_vectors):
            async with shared.direct.session() as session:
                await self._run_direct(session, batch, results, refresh, now)
        if with_vectors:
            await self._write_with_vectors(puts, put_vectors, now, refresh)
        metrics.observe_store_batch([_op_name(op) for op in op_list], time.perf_counter() - started)
        return results

    async def _run_direct(
        self,
        runner: Units,
        batch: _Batch,
        results: list[Result],
        refresh: dict[tuple[str, str], datetime],
        now: datetime,
    ) -> None:
        """The batch's direct reads, then its TTL refreshes and direct writes (one unit)."""
        shared, tenant = self._shared, self.tenant_id
        if batch.gets:
            await reads.gets(shared, tenant, runner, batch.gets, now, results, refresh)
        for i, search in batch.searches:
            results[i] = await reads.search_direct(shared, tenant, runner, search, now, refresh)
        for i, listing in batch.listings:
            results[i] = await reads.list_namespaces(shared, tenant, runner, listing, now)
        writes = batch.writes
        if refresh and not (batch.puts and shared.index is not None):
            writes = [(shared.direct.refresh, refresh_rows(tenant, refresh)), *writes]
        if writes:
            await runner.write(*writes)

    # ------------------------------------------------------------------ writes

    async def _write_with_vectors(
        self,
        puts: dict[tuple[str, str], PutOp],
        put_vectors: dict[tuple[str, str], list[tuple[str, bytes]]],
        now: datetime,
        refresh: dict[tuple[str, str], datetime],
    ) -> None:
        """The puts of a store with an index, and the batch's TTL refreshes, in one
        transaction. Vectors are written here: `write_statements` (app/store/writes.py)
        replaces each put item's vectors."""
        shared = self._shared
        writes = write_statements(
            shared.engine.dialect, self.tenant_id, shared.index, puts, put_vectors, now
        )
        # PostgreSQL: one statement is atomic by itself (no BEGIN / COMMIT round trips)
        one = len(writes) + bool(refresh) <= 1
        async with transaction(shared.engine, one_statement=one) as conn:
            if refresh:
                await conn.execute(queries.refresh_expiry(), refresh_rows(self.tenant_id, refresh))
            for statement, rows in writes:
                await conn.execute(statement, rows)

    # ------------------------------------------------------------------ maintenance

    async def sweep_expired(self) -> int:
        """Delete expired items of every tenant (and their vectors); returns how many.

        Expired items are already invisible to every read; this reclaims their space.
        """
        return await sweep(self._shared.engine, self._shared.clock())

    async def reindex(self, *, batch_size: int = 256) -> int:
        """Re-embed items (every tenant) whose vectors are missing, stale or of another model.

        Run after changing the embedding model or fields (`graphkeep store reindex`).
        """
        index = self._shared.index
        if index is None:
            raise InvalidInput("reindex needs an index: configure `store.index`")
        return await reindex_items(self._shared.engine, index, batch_size=batch_size)

    # ------------------------------------------------------------------ public API

    async def aget(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        with _namespace_errors():
            return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        with _namespace_errors():
            return await super().asearch(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        with _namespace_errors():
            await super().aput(namespace, key, value, index, ttl=ttl)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        with _namespace_errors():
            await super().adelete(namespace, key)

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        with _namespace_errors():
            return await super().alist_namespaces(
                prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
            )


def _check_tenant(tenant_id: str) -> str:
    if not isinstance(tenant_id, str) or not tenant_id:
        raise InvalidInput("tenant_id must be a non-empty string")
    return tenant_id

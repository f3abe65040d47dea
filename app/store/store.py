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
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db import migrate, sealed
from app.db.dialect import reader, single_statement_autocommit
from app.db.direct import Step
from app.db.engine import create_engine
from app.db.executor import Executor, Units
from app.db.types import utcnow
from app.errors import InvalidInput
from app.store import pgvector, queries
from app.store.config import StoreIndex, parse_index_config, parse_ttl_config
from app.store.direct import DirectStore
from app.store.filters import flatten_filter
from app.store.maintenance import reindex_items, sweep
from app.store.sealed_filters import matches
from app.store.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    SEPARATOR,
    join_namespace,
    split_prefix,
    validate_op,
)
from app.store.vectors import cosine_scores, embed_fields, rank, texts_to_embed
from app.store.writes import item_rows, write_statements

Clock = Callable[[], datetime]
PgvectorMode = Literal["auto", "off"]


@dataclass
class _Shared:
    """What every tenant view of one store shares."""

    engine: AsyncEngine
    index: StoreIndex | None
    ttl: TTLConfig | None
    clock: Clock
    max_value_bytes: int
    loop: asyncio.AbstractEventLoop | None = field(default=None)
    # "auto": semantic queries use pgvector where setup() made its column; "off": never
    pgvector_mode: PgvectorMode = "auto"
    # None until detected (setup() or the first semantic query)
    pgvector: bool | None = None
    # the same pool without BEGIN / COMMIT where one statement is atomic (PostgreSQL)
    autocommit: AsyncEngine = field(init=False)
    # the same pool for reads: no BEGIN / COMMIT, no SQLite write lock
    reads: AsyncEngine = field(init=False)
    # what the compiled statements run on (None: a fast-path executor of the store's own)
    executor: Executor | None = None
    # put, get, search without a query, list_namespaces: pre-compiled (app/store/direct.py)
    direct: DirectStore = field(init=False)

    def __post_init__(self) -> None:
        self.autocommit = (
            self.engine.execution_options(isolation_level="AUTOCOMMIT")
            if single_statement_autocommit(self.engine.dialect)
            else self.engine
        )
        self.reads = reader(self.engine)
        self.direct = DirectStore(self.engine, self.executor)


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


_ALL_ROWS = 2**31 - 1  # LIMIT (an INTEGER bind) of a search whose filter runs in Python
_SEALED_WINDOW = 10  # pgvector candidates per wanted result when the filter runs in Python


def _python_filtered(rows: Sequence[Any], filter: dict[str, Any] | None) -> list[Any]:
    """The rows whose decrypted value matches `filter` (app/store/sealed_filters.py)."""
    leaves, values = flatten_filter(filter)
    return [row for row in rows if matches(row.value, leaves, values)]


def _sealed(encoded: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Values as the direct upsert binds them (JSON text, bound raw): with a key, the JSON
    string of their sealed envelope, as the `SealedJSON` column type would store them."""
    keyring = sealed.active()
    if not keyring.enabled:
        return encoded
    return {
        ident: text if text == "{}" else json.dumps(keyring.seal_text(text))
        for ident, text in encoded.items()
    }


def _item(row: Row[Any]) -> Item:
    return Item(
        value=row.value,
        key=row.key,
        namespace=split_prefix(row.prefix),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _search_item(row: Row[Any], score: float | None) -> SearchItem:
    return SearchItem(
        namespace=split_prefix(row.prefix),
        key=row.key,
        value=row.value,
        created_at=row.created_at,
        updated_at=row.updated_at,
        score=score,
    )


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(want == "*" or got == want for got, want in pairs)


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
        self._shared = _Shared(
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
        Semantic searches and puts that write vectors go through SQLAlchemy (`_search`,
        `_write_with_vectors`).
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
        query_vectors = await self._embed_queries([op for _, op in batch.semantic])
        put_vectors = await self._embed_puts(puts)
        now = shared.clock()
        results: list[Result] = [None] * len(op_list)
        refresh: dict[tuple[str, str], datetime] = {}
        if batch.semantic:
            async with shared.reads.connect() as conn:
                for i, search in batch.semantic:
                    results[i] = await self._search(conn, search, now, query_vectors, refresh)
        with_vectors = bool(puts) and shared.index is not None
        if not with_vectors:
            batch.writes = self._direct_writes(puts, batch.encoded, now)
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
        if batch.gets:
            await self._gets(runner, batch.gets, now, results, refresh)
        for i, search in batch.searches:
            results[i] = await self._search_direct(runner, search, now, refresh)
        for i, listing in batch.listings:
            results[i] = await self._list_namespaces(runner, listing, now)
        writes = batch.writes
        if refresh and not (batch.puts and self._shared.index is not None):
            writes = [(self._shared.direct.refresh, self._refresh_rows(refresh)), *writes]
        if writes:
            await runner.write(*writes)

    def _refresh_rows(self, refresh: dict[tuple[str, str], datetime]) -> list[dict[str, Any]]:
        tenant = self.tenant_id
        return [
            {"b_tenant": tenant, "b_prefix": p, "b_key": k, "b_expires_at": expires}
            for (p, k), expires in refresh.items()
        ]

    # ------------------------------------------------------------------ reads

    async def _gets(
        self,
        runner: Units,
        gets: list[tuple[int, GetOp]],
        now: datetime,
        results: list[Result],
        refresh: dict[tuple[str, str], datetime],
    ) -> None:
        wanted = list(dict.fromkeys((join_namespace(op.namespace), op.key) for _, op in gets))
        rows = await self._shared.direct.get(runner, self.tenant_id, wanted, now)
        found = {(row.prefix, row.key): row for row in rows}
        for i, op in gets:
            row = found.get((join_namespace(op.namespace), op.key))
            if row is None:
                continue
            results[i] = _item(row)
            if op.refresh_ttl and row.ttl_minutes is not None:
                refresh[(row.prefix, row.key)] = now + timedelta(minutes=row.ttl_minutes)

    async def _search_direct(
        self,
        runner: Units,
        op: SearchOp,
        now: datetime,
        refresh: dict[tuple[str, str], datetime],
    ) -> list[SearchItem]:
        """A search without a query: newest `updated_at` first, then key."""
        prefix = join_namespace(op.namespace_prefix) if op.namespace_prefix else None
        in_python = bool(op.filter) and sealed.active().enabled
        # sealed values are opaque to SQL: filter the prefix's live items here instead
        sql_filter = None if in_python else op.filter
        leaves, params = queries.search_params(self.tenant_id, prefix, sql_filter, now)
        params["b_limit"] = _ALL_ROWS if in_python else op.limit
        params["b_offset"] = 0 if in_python else op.offset
        rows = await runner.fetch(self._shared.direct.search(bool(prefix), leaves), params)
        if in_python:
            rows = _python_filtered(rows, op.filter)[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            for row in rows:
                if row.ttl_minutes is not None:
                    refresh[(row.prefix, row.key)] = now + timedelta(minutes=row.ttl_minutes)
        return [_search_item(row, None) for row in rows]

    async def _search(
        self,
        conn: AsyncConnection,
        op: SearchOp,
        now: datetime,
        query_vectors: dict[str, list[float]],
        refresh: dict[tuple[str, str], datetime],
    ) -> list[SearchItem]:
        """A semantic search (with a query); those without one run in `_search_direct`."""
        assert op.query is not None
        prefix = join_namespace(op.namespace_prefix) if op.namespace_prefix else None
        dialect = conn.dialect
        index = self._shared.index
        assert index is not None  # _embed_queries raised otherwise
        vector = query_vectors[op.query]
        in_python = bool(op.filter) and sealed.active().enabled
        sql_filter = None if in_python else op.filter
        if await self._pgvector(conn):
            # sealed values: filter the nearest candidates here (README: a filtered semantic
            # search on an encrypted Store ranks within a widened window)
            wanted = (op.offset + op.limit) * (_SEALED_WINDOW if in_python else 1)
            scored = await pgvector.search(
                conn, self.tenant_id, prefix, sql_filter, now, index, vector, wanted
            )
            if in_python:
                kept = {id(r) for r in _python_filtered([r for _, r in scored], op.filter)}
                scored = [(score, r) for score, r in scored if id(r) in kept]
        else:
            stmt, params = queries.search_vectors(
                dialect, self.tenant_id, prefix, sql_filter, now, index.model_id
            )
            candidates = (await conn.execute(stmt, params)).all()
            if in_python:
                candidates = _python_filtered(candidates, op.filter)
            scores = cosine_scores(vector, [r.embedding for r in candidates])
            scored = list(zip(scores, candidates, strict=True))
        window = rank(scored)[op.offset : op.offset + op.limit]
        found = [(_search_item(row, score), row) for score, row in window]
        if op.refresh_ttl:
            for _, row in found:
                if row.ttl_minutes is not None:
                    refresh[(row.prefix, row.key)] = now + timedelta(minutes=row.ttl_minutes)
        return [item for item, _ in found]

    async def _pgvector(self, conn: AsyncConnection) -> bool:
        shared = self._shared
        if shared.pgvector is None:  # a store used without setup() (the server): detect once
            shared.pgvector = shared.pgvector_mode == "auto" and await pgvector.detect(conn)
        return shared.pgvector

    async def _list_namespaces(
        self, runner: Units, op: ListNamespacesOp, now: datetime
    ) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        lower, upper = "", None
        for condition in conditions:
            if condition.match_type == "prefix":
                fixed: list[str] = []
                for label in condition.path:
                    if label == "*":
                        break
                    fixed.append(label)
                if fixed:
                    lower = join_namespace(tuple(fixed))
                    upper = lower + "/"
                break
        direct = self._shared.direct
        params = {"b_tenant": self.tenant_id, "b_now": now, "b_lower": lower, "b_upper": upper}
        literal_only = op.max_depth is None and all(
            c.match_type == "prefix" and "*" not in c.path for c in conditions[:1]
        )
        if literal_only and len(conditions) <= 1:
            # Byte order of the joined prefixes is tuple order unless a label holds a
            # character below "." (then "a-b" sorts before "a.x"); the range [p, p/) also
            # admits only such siblings. Without one among the first offset + limit, those
            # are the answer and the walk stops there.
            want = op.offset + op.limit
            stmt = direct.listing(upper is not None, True)
            first = [row.prefix for row in await runner.fetch(stmt, {**params, "b_limit": want})]
            if not any(ch < SEPARATOR for prefix in first for ch in prefix):
                return [split_prefix(prefix) for prefix in first[op.offset : want]]
        rows = await runner.fetch(direct.listing(upper is not None, False), params)
        namespaces = [split_prefix(row.prefix) for row in rows]
        namespaces = [ns for ns in namespaces if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        else:
            namespaces.sort()
        return namespaces[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ writes

    def _direct_writes(
        self, puts: dict[tuple[str, str], PutOp], encoded: dict[tuple[str, str], str], now: datetime
    ) -> list[Step]:
        """The puts of a store without an index as direct steps: deletes (vectors an indexed
        store may have left, then the items), then one upsert (one row per item)."""
        direct = self._shared.direct
        tenant = self.tenant_id
        steps: list[Step] = []
        removed = [
            {"b_tenant": tenant, "b_prefix": p, "b_key": k}
            for (p, k), op in puts.items()
            if op.value is None
        ]
        if removed:
            steps += [(direct.delete_vectors, removed), (direct.delete_items, removed)]
        rows = item_rows(tenant, puts, now, _sealed(encoded))
        if rows:
            steps.append((direct.upsert, rows))
        return steps

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
        async with (shared.autocommit if one else shared.engine).begin() as conn:
            if refresh:
                await conn.execute(queries.refresh_expiry(), self._refresh_rows(refresh))
            for statement, rows in writes:
                await conn.execute(statement, rows)

    # ------------------------------------------------------------------ embeddings

    async def _embed_queries(self, searches: list[SearchOp]) -> dict[str, list[float]]:
        queries_ = list(dict.fromkeys(op.query for op in searches if op.query is not None))
        if not queries_:
            return {}
        index = self._shared.index
        if index is None:
            raise InvalidInput(
                "semantic search needs an index: configure `store.index` (dims, embed, fields)"
            )
        vectors = await asyncio.gather(*(index.embeddings.aembed_query(q) for q in queries_))
        return dict(zip(queries_, vectors, strict=True))

    async def _embed_puts(
        self, puts: dict[tuple[str, str], PutOp]
    ) -> dict[tuple[str, str], list[tuple[str, bytes]]]:
        index = self._shared.index
        if index is None:
            return {}
        wanted: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for ident, op in puts.items():
            if op.value is None or op.index is False:
                continue
            wanted[ident] = texts_to_embed(index, op.value, op.index)
        return await embed_fields(index, wanted)

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

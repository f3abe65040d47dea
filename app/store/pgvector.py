"""The pgvector path of semantic search: vectors in a pgvector column with an HNSW index.

Used on PostgreSQL when the `vector` extension is installed (or available and creatable) in
the database; everywhere else vectors are scored in process (app/store/vectors.py).

The objects live outside the Alembic metadata, so the migrations stay dialect-neutral and a
database without pgvector never needs the extension; `ensure()` creates them idempotently
(`SQLStore.setup()`, `graphkeep migrate`, `graphkeep store reindex`):

- `graphkeep_f32le_vector(bytea)`: an immutable SQL function decoding the portable
  little-endian float32 bytes of `store_vectors.embedding` into a `vector`;
- `store_vectors.embedding_vec vector`, a STORED generated column computed by that function:
  every write path (puts, reindex) fills it without knowing about pgvector, and it can never
  disagree with the portable bytes (which stay: they are the fallback and reindex's input);
- `ix_store_vectors_hnsw_<dims>`: an HNSW index (cosine) per dimension count, on the
  expression `embedding_vec::vector(<dims>)` and partial on `dims = <dims>` (an HNSW index
  needs a fixed dimension; the column has none, so vectors of any model fit it and a new
  `dims` only needs its index, made by setup, `graphkeep migrate` or `graphkeep store reindex`).

A query (`search()`) first counts the live items of its tenant and namespace (an index range;
not the filter) up to EXACT_BELOW: a small narrowing is ranked exactly in SQL (every candidate
vector's distance, no index), cheap and complete. A larger one asks the index for the
`hnsw.ef_search` nearest vectors of the tenant and model (10 per wanted item, 40 with a
filter, at most 1000), keeps those of the narrowing and returns the best; pgvector 0.6 has no
iterative scan, so when a selective filter leaves fewer items than `offset + limit`, the exact
ranking runs instead (a scan of the narrowed rows, what the portable path always pays). When
the candidate list cuts a run of equal scores at the page's end, the query is repeated once
with four times the rows; a longer run is cut in the index's order.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import base as postgresql_base
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.types import UserDefinedType

from app.db.access import transaction
from app.db.tables import store_items, store_vectors
from app.store import queries
from app.store.config import StoreIndex
from app.store.vectors import rank

log = logging.getLogger(__name__)

VECTOR_COLUMN = "embedding_vec"
INDEX_PREFIX = "ix_store_vectors_hnsw_"
FUNCTION = "graphkeep_f32le_vector"
MAX_INDEX_DIMS = 2000  # pgvector's HNSW limit for `vector`
MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
MIN_EF_SEARCH = 40  # pgvector's default
OVERFETCH = 2  # vector rows asked per wanted item (an item may have several vectors)
EXACT_BELOW = 1000  # narrowings with fewer live items are ranked exactly (cheap and complete)
EF_PER_ITEM = 10  # hnsw.ef_search per wanted item: room for a namespace of ~10% of the tenant
EF_PER_ITEM_FILTERED = 40  # with a filter too
RETRY_FACTOR = 4  # a tie at the end of the rows fetched: fetch this many times more, once

# little-endian float32 -> float8 by its IEEE 754 fields, exact for every finite value
_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}(b bytea) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
SELECT array_agg(
    ((CASE WHEN e = 0 THEN m * 2::float8 ^ -149
           ELSE (8388608 + m) * 2::float8 ^ (e - 150) END) * (1 - 2 * s))::real
    ORDER BY i)::vector
FROM (SELECT i, (w >> 31) & 1 AS s, (w >> 23) & 255 AS e, w & 8388607 AS m
      FROM (SELECT i, get_byte(b, 4 * i)::bigint
                      | (get_byte(b, 4 * i + 1)::bigint << 8)
                      | (get_byte(b, 4 * i + 2)::bigint << 16)
                      | (get_byte(b, 4 * i + 3)::bigint << 24) AS w
            FROM generate_series(0, length(b) / 4 - 1) AS i) AS words) AS fields
$fn$
"""


def index_name(dims: int) -> str:
    return f"{INDEX_PREFIX}{int(dims)}"


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic `include_object`: the pgvector objects made by `ensure()` are not drift."""
    if type_ == "column" and name == VECTOR_COLUMN:
        return getattr(getattr(obj, "table", None), "name", None) != store_vectors.name
    if type_ == "index" and name is not None and name.startswith(INDEX_PREFIX):
        return False
    return True


async def _scalar(conn: AsyncConnection, sql: str, **params: Any) -> Any:
    return (await conn.execute(text(sql), params)).scalar()


async def _has_column(conn: AsyncConnection) -> bool:
    return bool(
        await _scalar(
            conn,
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:t) "
            "AND attname = :c AND NOT attisdropped)",
            t=store_vectors.name,
            c=VECTOR_COLUMN,
        )
    )


async def _create_extension(conn: AsyncConnection) -> bool:
    installed = await _scalar(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if installed is not None:
        return True
    available = await _scalar(
        conn, "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
    )
    if not available:
        return False
    try:
        async with conn.begin_nested():
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except DBAPIError as exc:  # typically: permission denied to create extension
        log.warning(
            "pgvector is available but could not be created (%s); semantic search scores "
            "vectors in process. A superuser can run CREATE EXTENSION vector.",
            str(exc.orig).strip().splitlines()[0] if exc.orig else exc,
        )
        return False
    return True


async def ensure(engine: AsyncEngine, dims: int | None) -> bool:
    """Create the pgvector objects (idempotent); True when the pgvector path is usable.

    False on any other database than PostgreSQL, without the extension, or without the
    privilege to create it (then the portable path is used; nothing is left half made).
    """
    if engine.dialect.name != "postgresql":
        return False
    async with transaction(engine) as conn:
        # one setup at a time (several workers may start together)
        await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('graphkeep.pgvector'))"))
        if not await _create_extension(conn):
            return False
        if not await _has_column(conn):
            exists = await _scalar(
                conn, "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = :f)", f=FUNCTION
            )
            if not exists:
                await conn.execute(text(_FUNCTION_SQL))
            await conn.execute(
                text(
                    f"ALTER TABLE {store_vectors.name} ADD COLUMN IF NOT EXISTS {VECTOR_COLUMN} "
                    f"vector GENERATED ALWAYS AS ({FUNCTION}(embedding)) STORED"
                )
            )
        if dims is not None and 0 < dims <= MAX_INDEX_DIMS:
            await conn.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS {index_name(dims)} ON {store_vectors.name} "
                    f"USING hnsw (({VECTOR_COLUMN}::vector({int(dims)})) vector_cosine_ops) "
                    f"WHERE dims = {int(dims)}"
                )
            )
    return True


async def detect(conn: AsyncConnection) -> bool:
    """Read-only: whether `ensure()` has made the pgvector column in this database."""
    if conn.dialect.name != "postgresql":
        return False
    return await _has_column(conn)


# ---------------------------------------------------------------------------- queries


class Vector(UserDefinedType[Any]):
    """pgvector's `vector` / `vector(n)`, for casts (bound from a text literal '[x,y,...]')
    and for reflection (an Alembic comparison of a pgvector database reads the column)."""

    cache_ok = True

    def __init__(self, dims: int | None = None) -> None:
        self.dims = int(dims) if dims is not None else None

    def get_col_spec(self, **kw: Any) -> str:
        return "vector" if self.dims is None else f"vector({self.dims})"


postgresql_base.ischema_names.setdefault("vector", Vector)


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _distance(dims: int) -> Any:
    column: Any = literal_column(f"{store_vectors.name}.{VECTOR_COLUMN}::vector({int(dims)})")
    query = cast(bindparam("b_qvec", type_=Text), Vector(dims))
    return column.op("<=>", return_type=Float)(query)


def _narrowed(base: Select[Any], dims: int) -> Select[Any]:
    # a literal dims: the planner must prove the partial index's predicate from it
    return base.where(store_vectors.c.dims == literal_column(str(int(dims))))


@lru_cache(maxsize=256)
def approximate_statement(
    items: Select[Any], dims: int, candidates: int, fetch: int
) -> Select[Any]:
    """The HNSW index's `candidates` nearest vectors of the tenant and model (a subquery: the
    planner cannot turn it into a scan of the narrowed items, which it may cost wrongly), then
    those of live items matching the narrowing of `items` (`queries.search_items`, cached per
    shape), the nearest `fetch` of them with the item columns and `distance`.

    This is what an HNSW scan with conditions does anyway (pgvector 0.6 checks them after
    its `hnsw.ef_search` candidates); literal LIMITs, as a bound one is costed as a tenth of
    the rows by a generic plan.
    """
    distance = _distance(dims)
    near = (
        select(
            store_vectors.c.tenant_id,
            store_vectors.c.prefix,
            store_vectors.c.key,
            store_vectors.c.created_at,
            distance.label("distance"),
        )
        .where(
            store_vectors.c.tenant_id == bindparam("b_tenant"),
            store_vectors.c.model == bindparam("b_model"),
            store_vectors.c.dims == literal_column(str(int(dims))),
        )
        .order_by(distance)
        .limit(literal_column(str(int(candidates))))
        .subquery("near")
    )
    joined = near.join(
        store_items,
        and_(
            store_items.c.tenant_id == near.c.tenant_id,
            store_items.c.prefix == near.c.prefix,
            store_items.c.key == near.c.key,
        ),
    )
    assert items.whereclause is not None
    return (
        select(*queries.ITEM_COLUMNS, near.c.distance)
        .select_from(joined)
        .where(items.whereclause, near.c.created_at >= store_items.c.updated_at)
        .order_by(near.c.distance)
        .limit(literal_column(str(int(fetch))))
    )


@lru_cache(maxsize=256)
def settings_and_count_statement(items: Select[Any]) -> Select[Any]:
    """One round trip: the session settings of a search (see `_SETTINGS`) and how many live
    items the narrowing of `items` (tenant and namespace) holds, counted up to `b_cap`."""
    assert items.whereclause is not None
    capped = (
        select(literal_column("1"))
        .select_from(store_items)
        .where(items.whereclause)
        .limit(bindparam("b_cap", type_=Integer))
        .subquery("capped")
    )
    return select(
        func.set_config("hnsw.ef_search", bindparam("ef", type_=Text), False),
        func.set_config("plan_cache_mode", "force_custom_plan", False),
        select(func.count()).select_from(capped).scalar_subquery(),
    )


@lru_cache(maxsize=256)
def exact_statement(base: Select[Any], dims: int) -> Select[Any]:
    """Every item of the narrowing with its best `distance`, in the documented order, the
    first `b_fetch` of them (no index can serve this order: a scan of the narrowed rows)."""
    distance = _distance(dims)
    tie_breaks = (
        store_items.c.updated_at.desc(),
        store_items.c.key.collate("C"),
        store_items.c.prefix,
    )
    # NaN (a zero vector) scores 0, as in process
    best = func.min(func.coalesce(func.nullif(distance, literal_column("'NaN'::float8")), 1.0))
    return (
        _narrowed(base, dims)
        .with_only_columns(*queries.ITEM_COLUMNS, best.label("distance"))
        .group_by(store_items.c.tenant_id, store_items.c.prefix, store_items.c.key)
        .order_by(best, *tie_breaks)
        .limit(bindparam("b_fetch", type_=Integer))
    )


# Session-level settings (a semantic search may run outside a transaction, where SET LOCAL
# does nothing), set before its queries and plan_cache_mode restored after them:
# - hnsw.ef_search: the index's candidate list, room for the conditions it checks after it;
# - plan_cache_mode=force_custom_plan: the statements are prepared and cached per connection,
#   and after five executions PostgreSQL may switch to a generic plan, which costs a range on
#   a bound prefix at a default 0.5% of the rows and picks the items-first plan that sorts
#   every vector (150 ms instead of 7 on 10k items). A custom plan sees the real prefix and
#   query, and chooses between the HNSW scan and the narrowed exact scan on their real costs.
_SETTINGS = text(
    "SELECT set_config('hnsw.ef_search', :ef, false), "
    "set_config('plan_cache_mode', 'force_custom_plan', false)"
)
_RESTORE = text(
    "SELECT set_config('plan_cache_mode', reset_val, false) FROM pg_settings "
    "WHERE name = 'plan_cache_mode'"
)


def _score(distance: float | None) -> float:
    if distance is None or math.isnan(distance):
        return 0.0
    return 1.0 - float(distance)


async def search(
    conn: AsyncConnection,
    tenant_id: str,
    prefix: str | None,
    filter: Mapping[str, Any] | None,
    now: datetime,
    index: StoreIndex,
    query_vector: Sequence[float],
    want: int,
) -> list[tuple[float, Row[Any]]]:
    """Scored candidates (one row per vector; the caller keeps each item's best) covering the
    `want` best items of the narrowing, approximately through HNSW, else exactly."""
    base, params = queries.search_vectors(
        "postgresql", tenant_id, prefix, filter, now, index.model_id
    )
    items, _ = queries.search_items(
        "postgresql", tenant_id, prefix, filter, now, limit=want, offset=0
    )
    # counted without the filter: an index range, never a scan evaluating JSON conditions
    scope, _ = queries.search_items(
        "postgresql", tenant_id, prefix, None, now, limit=want, offset=0
    )
    params["b_qvec"] = vector_literal(query_vector)
    fetch = max(want * OVERFETCH, want + 10)
    zero_query = not any(query_vector)
    usable = not zero_query and index.dims <= MAX_INDEX_DIMS
    per_item = EF_PER_ITEM_FILTERED if filter else EF_PER_ITEM
    ef = min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, per_item * want, fetch))
    cap = EXACT_BELOW if usable else 0
    settings = await conn.execute(
        settings_and_count_statement(scope), {**params, "ef": str(ef), "b_cap": cap}
    )
    try:
        # below EXACT_BELOW live items the exact ranking is cheap and complete
        usable = usable and settings.one()[2] >= EXACT_BELOW
        return await _search(conn, base, items, params, index, want, fetch, ef if usable else 0)
    finally:
        await conn.execute(_RESTORE)


async def _search(
    conn: AsyncConnection,
    base: Select[Any],
    items: Select[Any],
    params: dict[str, Any],
    index: StoreIndex,
    want: int,
    fetch: int,
    ef: int,
) -> list[tuple[float, Row[Any]]]:
    retried = False
    while ef and fetch <= MAX_EF_SEARCH:
        approximate = approximate_statement(items, index.dims, ef, fetch)
        rows = (await conn.execute(approximate, params)).all()
        scored = [(_score(r.distance), r) for r in rows]
        ranked = rank(scored)
        if len(ranked) < want:
            break  # short: the conditions dropped too many of the index's candidates
        if len(rows) < fetch or ranked[want - 1][0] > scored[-1][0]:
            return scored  # nothing left out ties with the last item wanted
        if retried or fetch * RETRY_FACTOR > MAX_EF_SEARCH:
            return scored  # a tie cut by the index's order: approximate, as documented
        # the LIMIT cut a run of equal scores; once more with a longer list
        fetch *= RETRY_FACTOR
        retried = True
        if fetch > ef:
            ef = fetch
            await conn.execute(_SETTINGS, {"ef": str(ef)})
    exact = exact_statement(base, index.dims)
    rows = (await conn.execute(exact, {**params, "b_fetch": want})).all()
    return [(_score(r.distance), r) for r in rows]

"""The pgvector path's SQL: pure builders (no connection, no I/O); app/store/pgvector.py
executes them.

Two kinds: the catalog probes and DDL of `ensure()` (text SQL, since the objects live outside
the Alembic metadata: see app/store/pgvector.py), and the semantic-search statements, built
once per shape (`lru_cache`) over `queries.search_items` / `queries.search_vectors`, which
carry the tenant, namespace and filter conditions. The DDL is per database, not per tenant.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Text,
    TextClause,
    and_,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import base as postgresql_base
from sqlalchemy.types import UserDefinedType

from app.db.tables import store_items, store_vectors
from app.store import queries

VECTOR_COLUMN = "embedding_vec"
INDEX_PREFIX = "ix_store_vectors_hnsw_"
FUNCTION = "graphkeep_f32le_vector"
MAX_INDEX_DIMS = 2000  # pgvector's HNSW limit for `vector`

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


# ---------------------------------------------------------------------------- catalog, DDL

# one setup at a time (several workers may start together)
SETUP_LOCK = text("SELECT pg_advisory_xact_lock(hashtext('graphkeep.pgvector'))")
HAS_COLUMN = text(
    "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:t) "
    "AND attname = :c AND NOT attisdropped)"
).bindparams(t=store_vectors.name, c=VECTOR_COLUMN)
INSTALLED_VERSION = text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
AVAILABLE = text("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')")
CREATE_EXTENSION = text("CREATE EXTENSION IF NOT EXISTS vector")
FUNCTION_EXISTS = text("SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = :f)").bindparams(
    f=FUNCTION
)
CREATE_FUNCTION = text(_FUNCTION_SQL)
ADD_COLUMN = text(
    f"ALTER TABLE {store_vectors.name} ADD COLUMN IF NOT EXISTS {VECTOR_COLUMN} "
    f"vector GENERATED ALWAYS AS ({FUNCTION}(embedding)) STORED"
)


def create_index(dims: int) -> TextClause:
    """The HNSW index of one dimension count (partial on `dims`, see app/store/pgvector.py)."""
    return text(
        f"CREATE INDEX IF NOT EXISTS {index_name(dims)} ON {store_vectors.name} "
        f"USING hnsw (({VECTOR_COLUMN}::vector({int(dims)})) vector_cosine_ops) "
        f"WHERE dims = {int(dims)}"
    )


# ---------------------------------------------------------------------------- search


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
    """One round trip: the session settings of a search (see `SETTINGS`) and how many live
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
SETTINGS = text(
    "SELECT set_config('hnsw.ef_search', :ef, false), "
    "set_config('plan_cache_mode', 'force_custom_plan', false)"
)
RESTORE = text(
    "SELECT set_config('plan_cache_mode', reset_val, false) FROM pg_settings "
    "WHERE name = 'plan_cache_mode'"
)

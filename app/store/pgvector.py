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
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.access import transaction
from app.db.tables import store_vectors
from app.store import pgvector_queries as pq
from app.store import queries
from app.store.config import StoreIndex
from app.store.pgvector_queries import (
    FUNCTION,
    INDEX_PREFIX,
    MAX_INDEX_DIMS,
    VECTOR_COLUMN,
    Vector,
    approximate_statement,
    exact_statement,
    index_name,
    settings_and_count_statement,
    vector_literal,
)
from app.store.vectors import rank

__all__ = [
    "FUNCTION",
    "INDEX_PREFIX",
    "MAX_INDEX_DIMS",
    "VECTOR_COLUMN",
    "Vector",
    "approximate_statement",
    "detect",
    "ensure",
    "exact_statement",
    "include_object",
    "index_name",
    "search",
    "settings_and_count_statement",
    "vector_literal",
]

log = logging.getLogger(__name__)

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
MIN_EF_SEARCH = 40  # pgvector's default
OVERFETCH = 2  # vector rows asked per wanted item (an item may have several vectors)
EXACT_BELOW = 1000  # narrowings with fewer live items are ranked exactly (cheap and complete)
EF_PER_ITEM = 10  # hnsw.ef_search per wanted item: room for a namespace of ~10% of the tenant
EF_PER_ITEM_FILTERED = 40  # with a filter too
RETRY_FACTOR = 4  # a tie at the end of the rows fetched: fetch this many times more, once


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic `include_object`: the pgvector objects made by `ensure()` are not drift."""
    if type_ == "column" and name == VECTOR_COLUMN:
        return getattr(getattr(obj, "table", None), "name", None) != store_vectors.name
    if type_ == "index" and name is not None and name.startswith(INDEX_PREFIX):
        return False
    return True


async def _has_column(conn: AsyncConnection) -> bool:
    return bool((await conn.execute(pq.HAS_COLUMN)).scalar())


async def _create_extension(conn: AsyncConnection) -> bool:
    if (await conn.execute(pq.INSTALLED_VERSION)).scalar() is not None:
        return True
    if not (await conn.execute(pq.AVAILABLE)).scalar():
        return False
    try:
        async with conn.begin_nested():
            await conn.execute(pq.CREATE_EXTENSION)
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
        await conn.execute(pq.SETUP_LOCK)  # one setup at a time (several workers may start)
        if not await _create_extension(conn):
            return False
        if not await _has_column(conn):
            if not (await conn.execute(pq.FUNCTION_EXISTS)).scalar():
                await conn.execute(pq.CREATE_FUNCTION)
            await conn.execute(pq.ADD_COLUMN)
        if dims is not None and 0 < dims <= MAX_INDEX_DIMS:
            await conn.execute(pq.create_index(dims))
    return True


async def detect(conn: AsyncConnection) -> bool:
    """Read-only: whether `ensure()` has made the pgvector column in this database."""
    if conn.dialect.name != "postgresql":
        return False
    return await _has_column(conn)


# ---------------------------------------------------------------------------- search


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
        await conn.execute(pq.RESTORE)


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
            await conn.execute(pq.SETTINGS, {"ef": str(ef)})
    exact = exact_statement(base, index.dims)
    rows = (await conn.execute(exact, {**params, "b_fetch": want})).all()
    return [(_score(r.distance), r) for r in rows]

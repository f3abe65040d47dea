"""The reads of a Store batch: gets, searches (prefix/filter and semantic), namespace listings.

Each read notes in `refresh` the items whose TTL it refreshes; `SQLStore.abatch` writes those
with the batch's writes. All but semantic searches run on the direct session (`Units`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Result,
    SearchItem,
    SearchOp,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import sealed
from app.db.executor import Units
from app.store import pgvector, queries
from app.store.filters import flatten_filter
from app.store.sealed_filters import matches
from app.store.shared import Shared
from app.store.validation import SEPARATOR, join_namespace, split_prefix
from app.store.vectors import cosine_scores, rank

_ALL_ROWS = 2**31 - 1  # LIMIT (an INTEGER bind) of a search whose filter runs in Python
_SEALED_WINDOW = 10  # pgvector candidates per wanted result when the filter runs in Python


def _python_filtered(rows: Sequence[Any], filter: dict[str, Any] | None) -> list[Any]:
    """The rows whose decrypted value matches `filter` (app/store/sealed_filters.py)."""
    leaves, values = flatten_filter(filter)
    return [row for row in rows if matches(row.value, leaves, values)]


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


async def gets(
    shared: Shared,
    tenant: str,
    runner: Units,
    gets: list[tuple[int, GetOp]],
    now: datetime,
    results: list[Result],
    refresh: dict[tuple[str, str], datetime],
) -> None:
    wanted = list(dict.fromkeys((join_namespace(op.namespace), op.key) for _, op in gets))
    rows = await shared.direct.get(runner, tenant, wanted, now)
    found = {(row.prefix, row.key): row for row in rows}
    for i, op in gets:
        row = found.get((join_namespace(op.namespace), op.key))
        if row is None:
            continue
        results[i] = _item(row)
        if op.refresh_ttl and row.ttl_minutes is not None:
            refresh[(row.prefix, row.key)] = now + timedelta(minutes=row.ttl_minutes)


async def search_direct(
    shared: Shared,
    tenant: str,
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
    leaves, params = queries.search_params(tenant, prefix, sql_filter, now)
    params["b_limit"] = _ALL_ROWS if in_python else op.limit
    params["b_offset"] = 0 if in_python else op.offset
    rows = await runner.fetch(shared.direct.search(bool(prefix), leaves), params)
    if in_python:
        rows = _python_filtered(rows, op.filter)[op.offset : op.offset + op.limit]
    if op.refresh_ttl:
        for row in rows:
            if row.ttl_minutes is not None:
                refresh[(row.prefix, row.key)] = now + timedelta(minutes=row.ttl_minutes)
    return [_search_item(row, None) for row in rows]


async def search_semantic(
    shared: Shared,
    tenant: str,
    conn: AsyncConnection,
    op: SearchOp,
    now: datetime,
    query_vectors: dict[str, list[float]],
    refresh: dict[tuple[str, str], datetime],
) -> list[SearchItem]:
    """A semantic search (with a query); those without one run in `search_direct`."""
    assert op.query is not None
    prefix = join_namespace(op.namespace_prefix) if op.namespace_prefix else None
    dialect = conn.dialect
    index = shared.index
    assert index is not None  # embed_queries raised otherwise
    vector = query_vectors[op.query]
    in_python = bool(op.filter) and sealed.active().enabled
    sql_filter = None if in_python else op.filter
    if await _pgvector(shared, conn):
        # sealed values: filter the nearest candidates here (README: a filtered semantic
        # search on an encrypted Store ranks within a widened window)
        wanted = (op.offset + op.limit) * (_SEALED_WINDOW if in_python else 1)
        scored = await pgvector.search(conn, tenant, prefix, sql_filter, now, index, vector, wanted)
        if in_python:
            kept = {id(r) for r in _python_filtered([r for _, r in scored], op.filter)}
            scored = [(score, r) for score, r in scored if id(r) in kept]
    else:
        stmt, params = queries.search_vectors(
            dialect, tenant, prefix, sql_filter, now, index.model_id
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


async def _pgvector(shared: Shared, conn: AsyncConnection) -> bool:
    if shared.pgvector is None:  # a store used without setup() (the server): detect once
        shared.pgvector = shared.pgvector_mode == "auto" and await pgvector.detect(conn)
    return shared.pgvector


async def list_namespaces(
    shared: Shared, tenant: str, runner: Units, op: ListNamespacesOp, now: datetime
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
    direct = shared.direct
    params = {"b_tenant": tenant, "b_now": now, "b_lower": lower, "b_upper": upper}
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

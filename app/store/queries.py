"""Pure statement builders for the Store (SQLAlchemy Core). Executors live in store.py,
reads.py, writes.py and maintenance.py.

Every statement takes `tenant_id` and filters on it: the tenant is a column, never derived
from the namespace a caller sends. Every read also hides expired rows (`expires_at <= now`)
so an expired item is invisible at once, before any sweep. The exceptions are the
maintenance tasks (the TTL sweep, reindex), which span every tenant on purpose and say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Integer,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

from app.db.dialect import insert_for
from app.db.tables import store_items, store_vectors
from app.store.filters import Leaf, build_conditions, filter_params, flatten_filter

ITEM_COLUMNS = (
    store_items.c.prefix,
    store_items.c.key,
    store_items.c.value,
    store_items.c.created_at,
    store_items.c.updated_at,
    store_items.c.ttl_minutes,
)
# the byte after "." : every "a.b.<anything>" sorts in ["a.b.", "a.b/")
_AFTER_SEPARATOR = "/"


Params = dict[str, Any]


def live(now: datetime) -> ColumnElement[bool]:
    """Not expired at `now`."""
    return or_(store_items.c.expires_at.is_(None), store_items.c.expires_at > now)


def _live_bound() -> ColumnElement[bool]:
    return or_(store_items.c.expires_at.is_(None), store_items.c.expires_at > bindparam("b_now"))


def _prefix_bound(column: ColumnElement[str]) -> ColumnElement[bool]:
    """`column` is the namespace prefix or lies below it: one index range scan, the bounds
    bound as parameters (see _prefix_params).

    A plain `LIKE 'a.b%'` would also match the sibling "a.bc". In byte order (collation C on
    PostgreSQL, SQLite's default) every "a.b.<anything>" lies in ["a.b.", "a.b/"), and the
    namespace itself plus its descendants in ["a.b", "a.b/"); the residual `or_` drops
    siblings such as "a.b-x" or "a.b x".
    """
    return and_(
        column >= bindparam("b_lo"),
        column < bindparam("b_hi"),
        or_(column == bindparam("b_lo"), column >= bindparam("b_dot")),
    )


def _prefix_params(prefix: str) -> Params:
    return {"b_lo": prefix, "b_hi": prefix + _AFTER_SEPARATOR, "b_dot": prefix + "."}


# Statements below are built once per shape (functools.lru_cache) with bound parameters:
# constructing and cache-keying a SQLAlchemy statement costs more CPU than the indexed query
# itself takes on the server.


@lru_cache(maxsize=16)
def get_statement(slots: int) -> Select[Any]:
    """Live items of up to `slots` (prefix, key) pairs, bound as `b_p<i>` / `b_k<i>` (callers
    pad unused slots with a repeated pair); `b_tenant`, `b_now`."""
    if slots == 1:
        keys: ColumnElement[bool] = and_(
            store_items.c.prefix == bindparam("b_p0"), store_items.c.key == bindparam("b_k0")
        )
    else:
        keys = tuple_(store_items.c.prefix, store_items.c.key).in_(
            [tuple_(bindparam(f"b_p{i}"), bindparam(f"b_k{i}")) for i in range(slots)]
        )
    return select(*ITEM_COLUMNS).where(
        store_items.c.tenant_id == bindparam("b_tenant"), keys, _live_bound()
    )


@lru_cache(maxsize=512)
def _search_statement(
    dialect: str, has_prefix: bool, leaves: tuple[Leaf, ...], vectors: bool
) -> Select[Any]:
    conditions = [store_items.c.tenant_id == bindparam("b_tenant"), _live_bound()]
    if has_prefix:
        conditions.append(_prefix_bound(store_items.c.prefix))
    conditions.extend(build_conditions(dialect, store_items.c.value, leaves))
    if vectors:
        joined = store_items.join(
            store_vectors,
            and_(
                store_vectors.c.tenant_id == store_items.c.tenant_id,
                store_vectors.c.prefix == store_items.c.prefix,
                store_vectors.c.key == store_items.c.key,
            ),
        )
        return (
            select(*ITEM_COLUMNS, store_vectors.c.embedding)
            .select_from(joined)
            .where(
                *conditions,
                store_vectors.c.tenant_id == bindparam("b_tenant"),
                store_vectors.c.model == bindparam("b_model"),
                # a vector older than its item came from an earlier value (reindex fixes it)
                store_vectors.c.created_at >= store_items.c.updated_at,
            )
        )
    return (
        select(*ITEM_COLUMNS)
        .where(*conditions)
        .order_by(store_items.c.updated_at.desc(), _key_order(dialect), store_items.c.prefix)
        .limit(bindparam("b_limit", type_=Integer))
        .offset(bindparam("b_offset", type_=Integer))
    )


def _key_order(dialect: str) -> ColumnElement[str]:
    """Keys in code point order, as Python compares them (langgraph's in-memory store), on
    PostgreSQL too (its default collation is slower and orders "B" after "a")."""
    if dialect == "postgresql":
        return store_items.c.key.collate("C")
    return store_items.c.key


def _search_params(
    tenant_id: str, prefix: str | None, filter: Mapping[str, Any] | None, now: datetime
) -> tuple[tuple[Leaf, ...], Params]:
    leaves, values = flatten_filter(filter)
    params: Params = {"b_tenant": tenant_id, "b_now": now, **filter_params(values)}
    if prefix:
        params.update(_prefix_params(prefix))
    return leaves, params


def search_statement(dialect: str, has_prefix: bool, leaves: tuple[Leaf, ...]) -> Select[Any]:
    """The statement of `search_items` for one shape (bound as `search_params` binds, plus
    `b_limit` and `b_offset`)."""
    return _search_statement(dialect, has_prefix, leaves, False)


def search_params(
    tenant_id: str, prefix: str | None, filter: Mapping[str, Any] | None, now: datetime
) -> tuple[tuple[Leaf, ...], Params]:
    """(shape, bound parameters) of a search: its filter leaves, and tenant, now, prefix
    bounds and filter values."""
    return _search_params(tenant_id, prefix, filter, now)


def search_items(
    dialect: Dialect | str,
    tenant_id: str,
    prefix: str | None,
    filter: Mapping[str, Any] | None,
    now: datetime,
    *,
    limit: int,
    offset: int,
) -> tuple[Select[Any], Params]:
    """Live items under `prefix` matching `filter`, newest `updated_at` first, then key."""
    name = dialect if isinstance(dialect, str) else dialect.name
    leaves, params = _search_params(tenant_id, prefix, filter, now)
    params.update(b_limit=limit, b_offset=offset)
    return _search_statement(name, bool(prefix), leaves, False), params


def search_vectors(
    dialect: Dialect | str,
    tenant_id: str,
    prefix: str | None,
    filter: Mapping[str, Any] | None,
    now: datetime,
    model: str,
) -> tuple[Select[Any], Params]:
    """Candidates for a semantic query: narrowed by tenant, namespace and filter in SQL, with
    every stored vector of the current model (scored in process)."""
    name = dialect if isinstance(dialect, str) else dialect.name
    leaves, params = _search_params(tenant_id, prefix, filter, now)
    params["b_model"] = model
    return _search_statement(name, bool(prefix), leaves, True), params


def _one_item(table: Table) -> tuple[ColumnElement[bool], ...]:
    """The row(s) of one item: (b_tenant, b_prefix, b_key), for executemany."""
    return (
        table.c.tenant_id == bindparam("b_tenant"),
        table.c.prefix == bindparam("b_prefix"),
        table.c.key == bindparam("b_key"),
    )


@lru_cache(maxsize=1)
def refresh_expiry() -> Update:
    """Executemany: set `expires_at` of (b_tenant, b_prefix, b_key) to b_expires_at."""
    return (
        update(store_items)
        .where(*_one_item(store_items))
        .values(expires_at=bindparam("b_expires_at"))
    )


@lru_cache(maxsize=1)
def delete_item() -> Delete:
    """Executemany: delete the item (b_tenant, b_prefix, b_key)."""
    return delete(store_items).where(*_one_item(store_items))


@lru_cache(maxsize=1)
def delete_item_vectors() -> Delete:
    """Executemany: delete every vector of the item (b_tenant, b_prefix, b_key)."""
    return delete(store_vectors).where(*_one_item(store_vectors))


@lru_cache(maxsize=4)
def _upsert_statement(dialect: str) -> Any:
    stmt = insert_for(dialect, store_items)
    return stmt.on_conflict_do_update(
        index_elements=["tenant_id", "prefix", "key"],
        set_={
            name: stmt.excluded[name]
            for name in ("value", "updated_at", "expires_at", "ttl_minutes", "index_fields")
        },
    )


def upsert_items(dialect: Dialect | str) -> Any:
    """Insert or update items (execute with one dict per row); `created_at` keeps its first
    value."""
    return _upsert_statement(dialect if isinstance(dialect, str) else dialect.name)


def _keys_condition(keys: Sequence[tuple[str, str]]) -> ColumnElement[bool]:
    if len(keys) == 1:
        prefix, key = keys[0]
        return and_(store_items.c.prefix == prefix, store_items.c.key == key)
    return tuple_(store_items.c.prefix, store_items.c.key).in_(list(keys))


def delete_items(tenant_id: str, keys: Sequence[tuple[str, str]]) -> Delete:
    return delete(store_items).where(store_items.c.tenant_id == tenant_id, _keys_condition(keys))


def delete_vectors(tenant_id: str, keys: Sequence[tuple[str, str]]) -> Delete:
    if len(keys) == 1:
        cond: ColumnElement[bool] = and_(
            store_vectors.c.prefix == keys[0][0], store_vectors.c.key == keys[0][1]
        )
    else:
        cond = tuple_(store_vectors.c.prefix, store_vectors.c.key).in_(list(keys))
    return delete(store_vectors).where(store_vectors.c.tenant_id == tenant_id, cond)


@lru_cache(maxsize=4)
def next_namespace(bounded_above: bool, limited: bool) -> Select[Any]:
    """Distinct live prefixes from `b_lower` (inclusive), below `b_upper` if `bounded_above`,
    in byte order, as a loose index scan (the first `b_limit` of them if `limited`, or all);
    `b_tenant`, `b_now`.

    A recursive query jumps from one prefix to the next through the primary key, so listing
    namespaces costs one index probe per namespace, not a scan of every item; the walk stops
    once the outer LIMIT is satisfied.
    """

    def bounded(stmt: Select[Any]) -> Select[Any]:
        stmt = stmt.where(store_items.c.tenant_id == bindparam("b_tenant"), _live_bound())
        if bounded_above:
            stmt = stmt.where(store_items.c.prefix < bindparam("b_upper"))
        # a literal LIMIT 1 in index order: the planner walks the primary key (a bound
        # LIMIT would be costed as 10% of the rows)
        return stmt.order_by(store_items.c.prefix).limit(literal_column("1"))

    first = bounded(
        select(store_items.c.prefix).where(store_items.c.prefix >= bindparam("b_lower"))
    )
    walk = select(first.scalar_subquery().label("prefix")).cte("ns", recursive=True)
    after = bounded(
        select(store_items.c.prefix).where(store_items.c.prefix > walk.c.prefix)
    ).scalar_subquery()
    walk = walk.union_all(
        select(after.label("prefix")).select_from(walk).where(walk.c.prefix.is_not(None))
    )
    stmt = select(walk.c.prefix).where(walk.c.prefix.is_not(None))
    return stmt.limit(bindparam("b_limit", type_=Integer)) if limited else stmt


def expired_vectors(now: datetime) -> Delete:
    """Vectors of expired items (every tenant: the sweeper is a maintenance task)."""
    expired = select(store_items.c.tenant_id, store_items.c.prefix, store_items.c.key).where(
        store_items.c.expires_at <= now
    )
    return delete(store_vectors).where(
        tuple_(store_vectors.c.tenant_id, store_vectors.c.prefix, store_vectors.c.key).in_(expired)
    )


def expired_items(now: datetime) -> Delete:
    return delete(store_items).where(store_items.c.expires_at <= now)


def count_live_items(tenant_id: str, now: datetime) -> Select[int]:
    """How many of a tenant's items have not expired at `now` (the console's Store size)."""
    item = store_items.c
    return select(func.count()).where(
        item.tenant_id == tenant_id, or_(item.expires_at.is_(None), item.expires_at > now)
    )


@lru_cache(maxsize=1)
def insert_vectors() -> Insert:
    """Executemany: insert vector rows (one dict per row, its `tenant_id` included)."""
    return insert(store_vectors)


# --------------------------------------------------------------------------- reindex
# `graphkeep store reindex` walks every tenant's items (an operator task, never reachable from
# a request): an item is addressed by its full identity (tenant_id, prefix, key).

Ident = tuple[str, str, str]  # tenant_id, prefix, key


def _ident_in(table: Table, idents: Sequence[Ident]) -> ColumnElement[bool]:
    return tuple_(table.c.tenant_id, table.c.prefix, table.c.key).in_(list(idents))


def reindex_batch(after: Ident | None, limit: int) -> Select[Any]:
    """The next `limit` items (every tenant) after `after`, in key order, with what their
    embedding needs."""
    item = store_items.c
    stmt = (
        select(
            item.tenant_id, item.prefix, item.key, item.value, item.index_fields, item.updated_at
        )
        .order_by(item.tenant_id, item.prefix, item.key)
        .limit(limit)
    )
    if after is not None:
        stmt = stmt.where(tuple_(item.tenant_id, item.prefix, item.key) > after)
    return stmt


def vector_stamps(idents: Sequence[Ident]) -> Select[Any]:
    """Model and creation time of every vector of these items."""
    vec = store_vectors.c
    return select(vec.tenant_id, vec.prefix, vec.key, vec.model, vec.created_at).where(
        _ident_in(store_vectors, idents)
    )


def delete_vectors_of(idents: Sequence[Ident]) -> Delete:
    """Every vector of these items."""
    return delete(store_vectors).where(_ident_in(store_vectors, idents))

"""SQL for thread rows: pure builders and small executors taking `conn` and `tenant_id`.

The run engine's own thread-row changes live in run_status.py; both write the same row.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    LargeBinary,
    Select,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.dialect import json_contains
from app.db.listing import order_by
from app.db.tables import (
    checkpoint_blobs,
    checkpoint_writes,
    checkpoints,
    run_events,
    runs,
    thread_events,
    threads,
)
from app.threads.schemas import THREAD_SORT_COLUMNS, JSONObject, Thread, ThreadTTL

T = threads.c


def row_to_thread(row: Row[Any], *, include_ttl: bool = False) -> Thread:
    ttl: JSONObject | None = None
    if include_ttl and row.ttl_minutes is not None:
        ttl = {
            "strategy": row.ttl_strategy or "delete",
            "ttl_minutes": row.ttl_minutes,
            "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        }
    return Thread(
        thread_id=row.thread_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        state_updated_at=row.state_updated_at,
        metadata=row.metadata or {},
        config=row.config or {},
        status=row.status,
        values=row.values,
        interrupts=row.interrupts or {},
        error=row.error,
        ttl=ttl,
    )


def ttl_columns(ttl: ThreadTTL | None, now: datetime) -> JSONObject:
    if ttl is None:
        return {}
    return {
        "ttl_minutes": ttl.ttl,
        "ttl_strategy": ttl.strategy,
        "expires_at": now + timedelta(minutes=ttl.ttl),
    }


# State and history need only whether the thread exists and which graph it has: built once,
# and the row's `values` cache (possibly large JSON) is neither fetched nor decoded.
THREAD_METADATA = select(T.metadata).where(
    T.tenant_id == bindparam("tenant_id"), T.thread_id == bindparam("thread_id")
)


THREAD_ROW = select(threads).where(
    T.tenant_id == bindparam("tenant_id"), T.thread_id == bindparam("thread_id")
)
# PostgreSQL: a metadata patch is one statement, `||` being exactly the shallow merge the
# API promises (SQLite's json_patch is a recursive merge-patch that drops nulls, so SQLite
# merges in Python inside its transaction).
PATCH_THREAD_METADATA_PG = (
    update(threads)
    # not `tenant_id`: UPDATE reserves column names as bind names of its SET clause
    .where(T.tenant_id == bindparam("b_tenant_id"), T.thread_id == bindparam("b_thread_id"))
    .values(
        metadata=T.metadata.op("||")(bindparam("patch", type_=T.metadata.type)),
        updated_at=bindparam("now"),
    )
    .returning(*threads.columns)
)


async def find_thread_row(
    conn: AsyncConnection, *, tenant_id: str, thread_id: str
) -> Row[Any] | None:
    stmt = select(threads).where(T.thread_id == thread_id, T.tenant_id == tenant_id)
    return (await conn.execute(stmt)).first()


_INSERT_THREAD = insert(threads)


async def insert_thread(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    metadata: JSONObject,
    now: datetime,
    values: Any = None,
    interrupts: JSONObject | None = None,
    status: str = "idle",
    extra: JSONObject | None = None,
) -> None:
    await conn.execute(
        _INSERT_THREAD,
        thread_row(
            tenant_id=tenant_id,
            thread_id=thread_id,
            metadata=metadata,
            now=now,
            values=values,
            interrupts=interrupts,
            status=status,
            extra=extra,
        ),
    )


def thread_row(
    *,
    tenant_id: str,
    thread_id: str,
    metadata: JSONObject,
    now: datetime,
    values: Any = None,
    interrupts: JSONObject | None = None,
    status: str = "idle",
    extra: JSONObject | None = None,
) -> JSONObject:
    """A new thread's columns (the TTL ones only when `extra` has them)."""
    # Parameters, not .values(): the statement is not rebuilt and re-coerced per thread, and
    # its compiled form is cached per set of columns (the TTL ones are optional).
    return {
        "thread_id": thread_id,
        "tenant_id": tenant_id,
        "status": status,
        "metadata": metadata,
        "config": {},
        "values": values,
        "interrupts": interrupts or {},
        "error": None,
        "created_at": now,
        "updated_at": now,
        "state_updated_at": now,
        **(extra or {}),
    }


async def update_thread_row(
    conn: AsyncConnection, *, tenant_id: str, thread_id: str, values: JSONObject
) -> None:
    await conn.execute(
        update(threads).where(T.thread_id == thread_id, T.tenant_id == tenant_id).values(**values)
    )


async def set_thread_state(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    status: str,
    values: Any,
    interrupts: JSONObject,
    now: datetime,
) -> None:
    """Refresh the values cache, interrupts and status after a state change."""
    await update_thread_row(
        conn,
        tenant_id=tenant_id,
        thread_id=thread_id,
        values={
            "status": status,
            "values": values,
            "interrupts": interrupts,
            "updated_at": now,
            "state_updated_at": now,
        },
    )


async def delete_thread_rows(
    conn: AsyncConnection, *, tenant_id: str, thread_ids: list[str]
) -> list[str]:
    """Delete threads with their runs and run events; returns the ids that existed."""
    if not thread_ids:
        return []
    found = (
        (
            await conn.execute(
                select(T.thread_id).where(T.tenant_id == tenant_id, T.thread_id.in_(thread_ids))
            )
        )
        .scalars()
        .all()
    )
    if not found:
        return []
    await conn.execute(
        delete(run_events).where(
            run_events.c.tenant_id == tenant_id, run_events.c.thread_id.in_(found)
        )
    )
    await conn.execute(
        delete(thread_events).where(
            thread_events.c.tenant_id == tenant_id, thread_events.c.thread_id.in_(found)
        )
    )
    await conn.execute(
        delete(runs).where(runs.c.tenant_id == tenant_id, runs.c.thread_id.in_(found))
    )
    await conn.execute(delete(threads).where(T.tenant_id == tenant_id, T.thread_id.in_(found)))
    return list(found)


def search_statement(
    *,
    count: bool,
    metadata: bool,
    values: bool,
    status: bool,
    sort_by: str | None = None,
    sort_order: str | None = None,
) -> Select[Any]:
    """PostgreSQL: a thread search (or count) of one filter shape with every value a bind
    parameter (tenant_id, metadata, values, status, limit, offset), to compile once per
    shape; the same conditions as `filtered` spells with literals."""
    stmt = select(func.count().label("n")).select_from(threads) if count else select(threads)
    stmt = stmt.where(T.tenant_id == bindparam("tenant_id"))
    if metadata:
        stmt = stmt.where(T.metadata.op("@>")(bindparam("metadata", type_=postgresql.JSONB)))
    if values:
        stmt = stmt.where(
            T["values"].is_not(None),
            T["values"].op("@>")(bindparam("values", type_=postgresql.JSONB)),
        )
    if status:
        stmt = stmt.where(T.status == bindparam("status"))
    if count:
        return stmt
    columns = {name: threads.c[name] for name in THREAD_SORT_COLUMNS}
    stmt = stmt.order_by(*order_by(columns, sort_by, sort_order, tie_breaker=T.thread_id))
    return stmt.limit(bindparam("limit")).offset(bindparam("offset"))


def filtered(
    stmt: Select[Any],
    dialect: str,
    *,
    tenant_id: str,
    metadata: JSONObject | None = None,
    values: JSONObject | None = None,
    status: str | None = None,
    ids: list[str] | None = None,
) -> Select[Any]:
    stmt = stmt.where(T.tenant_id == tenant_id)
    if metadata:
        stmt = stmt.where(json_contains(dialect, T.metadata, metadata))
    if values:
        stmt = stmt.where(T["values"].is_not(None), json_contains(dialect, T["values"], values))
    if status is not None:
        stmt = stmt.where(T.status == status)
    if ids is not None:
        stmt = stmt.where(T.thread_id.in_(ids))
    return stmt


# --------------------------------------------------------------------------- storage figures


def _nbytes(dialect: str, column: Any) -> Any:
    """Stored size in bytes, computed by the database (never read into Python): bytea and
    BLOB by length; text by its encoded size (SQLite's length() counts characters)."""
    if isinstance(column.type, LargeBinary):
        return func.coalesce(func.sum(func.length(column)), 0)
    if dialect == "postgresql":
        return func.coalesce(func.sum(func.octet_length(column)), 0)
    return func.coalesce(func.sum(func.length(cast(column, LargeBinary))), 0)


def storage_statements(dialect: str, *, tenant_id: str, thread_id: str) -> dict[str, Select[Any]]:
    """Count and bytes per table of one thread's persisted state (each an index range on the
    thread's key), and channel values per channel."""
    ck, bl, wr, ev = checkpoints.c, checkpoint_blobs.c, checkpoint_writes.c, run_events.c
    return {
        "checkpoints": select(func.count(), _nbytes(dialect, ck.checkpoint)).where(
            ck.tenant_id == tenant_id, ck.thread_id == thread_id
        ),
        "channel_values": select(bl.channel, func.count(), _nbytes(dialect, bl.blob))
        .where(bl.tenant_id == tenant_id, bl.thread_id == thread_id)
        .group_by(bl.channel)
        .order_by(bl.channel),
        "writes": select(func.count(), _nbytes(dialect, wr.blob)).where(
            wr.tenant_id == tenant_id, wr.thread_id == thread_id
        ),
        "events": select(func.count(), _nbytes(dialect, ev.data)).where(
            ev.thread_id == thread_id, ev.tenant_id == tenant_id
        ),
    }


def visibility_statement(
    dialect: str, *, tenant_id: str, thread_id: str, auth_filter: JSONObject | None
) -> Select[Any]:
    """One row when the tenant has the thread: whether a custom-auth filter (a containment
    object on metadata, app/auth/filters.py) admits it. No row: no such thread."""
    admitted = json_contains(dialect, T.metadata, auth_filter) if auth_filter else true()
    return select(admitted.label("visible")).where(
        T.tenant_id == tenant_id, T.thread_id == thread_id
    )


def filtered_thread_row_sqlite(auth_filter: JSONObject) -> Select[Any]:
    """SQLite: `THREAD_ROW` plus a custom-auth filter, its values part of the statement."""
    return THREAD_ROW.where(json_contains("sqlite", T.metadata, auth_filter))


# PostgreSQL: `THREAD_ROW` plus a custom-auth filter as one JSONB bind (one statement shape)
FILTERED_THREAD_ROW_PG = THREAD_ROW.where(
    T.metadata.op("@>")(bindparam("auth_filter", type_=postgresql.JSONB))
)

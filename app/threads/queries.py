"""SQL for thread rows: pure statement builders (no connection, no I/O); the thread service,
state.py and run_status.py execute them.

Every builder takes the caller's `tenant_id` (or binds it). Statements whose shape never
changes are built once (module constants), so SQLAlchemy's compiled cache
and asyncpg's prepared statements see one object each; values then come as parameters.
The busy rule (which runs keep a thread busy) is written once, here (`active_runs_on`,
`thread_status_after`), and used by the run engine's settle on both dialects.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    LargeBinary,
    Select,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Row
from sqlalchemy.sql.dml import Delete, Update

from app.db.dialect import insert_for, json_contains, one_of
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
from app.statuses import ACTIVE_RUN_STATUSES, ThreadStatus
from app.threads.schemas import THREAD_SORT_COLUMNS, JSONObject, Thread, ThreadTTL

T = threads.c


def row_to_thread(row: Row[Any], *, include_ttl: bool = False) -> Thread:
    m = row._mapping  # by key: a Row's attribute lookup costs about five times more
    ttl: JSONObject | None = None
    if include_ttl and m["ttl_minutes"] is not None:
        ttl = {
            "strategy": m["ttl_strategy"] or "delete",
            "ttl_minutes": m["ttl_minutes"],
            "expires_at": m["expires_at"].isoformat() if m["expires_at"] else None,
        }
    return Thread(
        thread_id=m["thread_id"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        state_updated_at=m["state_updated_at"],
        metadata=m["metadata"] or {},
        config=m["config"] or {},
        status=m["status"],
        values=m["values"],
        interrupts=m["interrupts"] or {},
        error=m["error"],
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


def thread_key(tenant_id: str, thread_id: str) -> JSONObject:
    """The parameters of `THREAD_ROW` / `THREAD_METADATA`."""
    return {"tenant_id": tenant_id, "thread_id": thread_id}


# A new thread: the row comes as parameters (`thread_row`), not .values(), so the statement
# is not rebuilt and re-coerced per thread; its compiled form is cached per set of columns
# (the TTL ones are optional).
INSERT_THREAD = insert(threads)


def thread_row(
    *,
    tenant_id: str,
    thread_id: str,
    metadata: JSONObject,
    now: datetime,
    values: Any = None,
    interrupts: JSONObject | None = None,
    status: str = ThreadStatus.IDLE,
    extra: JSONObject | None = None,
) -> JSONObject:
    """A new thread's columns (the TTL ones only when `extra` has them): `INSERT_THREAD`'s
    parameters."""
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


def update_thread(tenant_id: str, thread_id: str, values: JSONObject) -> Update:
    """Set `values` (column -> value) on the thread."""
    return (
        update(threads).where(T.thread_id == thread_id, T.tenant_id == tenant_id).values(**values)
    )


def thread_state_update(
    *,
    tenant_id: str,
    thread_id: str,
    status: str,
    values: Any,
    interrupts: JSONObject,
    now: datetime,
) -> Update:
    """Refresh the values cache, interrupts and status after a state change."""
    return update_thread(
        tenant_id,
        thread_id,
        {
            "status": status,
            "values": values,
            "interrupts": interrupts,
            "updated_at": now,
            "state_updated_at": now,
        },
    )


def existing_thread_ids(tenant_id: str, thread_ids: list[str]) -> Select[Any]:
    """Which of `thread_ids` the tenant has."""
    return select(T.thread_id).where(T.tenant_id == tenant_id, T.thread_id.in_(thread_ids))


def delete_thread_rows(tenant_id: str, thread_ids: list[str]) -> list[Delete]:
    """Delete existing threads with their runs, run events and thread-stream log, in order
    (the checkpoints are the saver's)."""
    return [
        delete(run_events).where(
            run_events.c.tenant_id == tenant_id, run_events.c.thread_id.in_(thread_ids)
        ),
        delete(thread_events).where(
            thread_events.c.tenant_id == tenant_id, thread_events.c.thread_id.in_(thread_ids)
        ),
        delete(runs).where(runs.c.tenant_id == tenant_id, runs.c.thread_id.in_(thread_ids)),
        delete(threads).where(T.tenant_id == tenant_id, T.thread_id.in_(thread_ids)),
    ]


def active_run_ids(tenant_id: str, thread_id: str) -> Select[Any]:
    """Pending or running runs of the thread."""
    return select(runs.c.run_id).where(
        runs.c.tenant_id == tenant_id,
        runs.c.thread_id == thread_id,
        runs.c.status.in_(sorted(ACTIVE_RUN_STATUSES)),
    )


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


# --------------------------------------------------------------------------- the run engine's
# thread-row statements (executed by run_status.py inside the run engine's transactions)

# the busy rule below is the one place that says which runs keep a thread busy
_ACTIVE = sorted(ACTIVE_RUN_STATUSES)


def active_runs_on(
    thread_id: Any, tenant_id: Any, *, other_than: Any = None
) -> ColumnElement[bool]:
    """EXISTS a pending or running run on the thread (other than `other_than`, if given)."""
    conditions = [
        runs.c.thread_id == thread_id,
        runs.c.tenant_id == tenant_id,
        one_of(runs.c.status, _ACTIVE),  # not IN: the statement is cached (run create)
    ]
    if other_than is not None:
        conditions.append(runs.c.run_id != other_than)
    return exists().where(*conditions)


def thread_status_after(
    thread_id: Any, tenant_id: Any, status: Any, *, other_than: Any = None
) -> ColumnElement[str]:
    """The thread's status once a run ended or was cancelled: `busy` while another run of it
    is pending or running (busy wins), else `status` (idle / interrupted / error).

    `other_than` names the ending run when the statement's snapshot still shows it running
    (PostgreSQL's one-statement settle); a transaction that already ended it passes None."""
    active = active_runs_on(thread_id, tenant_id, other_than=other_than)
    return case((active, ThreadStatus.BUSY.value), else_=status)


# One boolean: whether a run of the thread is pending or running (binds `tenant_id`,
# `thread_id`: `thread_key`).
HAS_ACTIVE_RUNS = select(active_runs_on(bindparam("thread_id"), bindparam("tenant_id")))


def insert_thread_for_run(
    dialect: str,
    *,
    tenant_id: str,
    thread_id: str,
    metadata: JSONObject,
    config: JSONObject,
    now: datetime,
) -> Insert:
    """A thread created for a run, already busy; ON CONFLICT DO NOTHING (rowcount 0: taken),
    since a caught IntegrityError would abort a PostgreSQL transaction."""
    stmt: Insert = (
        insert_for(dialect, threads)
        .values(
            thread_id=thread_id,
            tenant_id=tenant_id,
            status=ThreadStatus.BUSY.value,
            metadata=metadata,
            config=config,
            values=None,
            interrupts={},
            error=None,
            created_at=now,
            updated_at=now,
            state_updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["thread_id"])
    )
    return stmt


def mark_thread_busy(
    *, tenant_id: str, thread_id: str, metadata: JSONObject, config: JSONObject, now: datetime
) -> Update:
    """Busy, with the thread's new full `metadata` and `config` (a run was queued)."""
    return update_thread(
        tenant_id,
        thread_id,
        {
            "status": ThreadStatus.BUSY.value,
            "metadata": metadata,
            "config": config,
            "updated_at": now,
        },
    )


def settle_thread(
    *, tenant_id: str, thread_id: str, status: str, changes: JSONObject, now: datetime
) -> Update:
    """The thread's status after a run (`status`, or busy by `thread_status_after`), with
    `changes` (error, values cache, interrupts...), returning the status written."""
    values = {
        "status": thread_status_after(thread_id, tenant_id, status),
        "updated_at": now,
        **changes,
    }
    return update_thread(tenant_id, thread_id, values).returning(T.status)


def delete_thread(tenant_id: str, thread_id: str) -> Delete:
    """Delete one thread row (its runs go by the foreign key cascade)."""
    return delete(threads).where(T.thread_id == thread_id, T.tenant_id == tenant_id)


# --------------------------------------------------------------------------- search


def thread_ids_by_metadata(dialect: str, *, tenant_id: str, metadata: JSONObject) -> Select[Any]:
    """Ids of the tenant's threads whose metadata contains `metadata`."""
    return filtered(select(T.thread_id), dialect, tenant_id=tenant_id, metadata=metadata)


def search_page(
    dialect: str,
    *,
    tenant_id: str,
    metadata: JSONObject | None,
    values: JSONObject | None,
    status: str | None,
    ids: list[str] | None,
    sort_by: str | None,
    sort_order: str | None,
    limit: int,
    offset: int,
) -> Select[Any]:
    """A page of the portable search (values written into the statement): `limit` rows
    from `offset`, in the asked order with the thread id as tie breaker."""
    stmt = filtered(
        select(threads),
        dialect,
        tenant_id=tenant_id,
        metadata=metadata,
        values=values,
        status=status,
        ids=ids,
    )
    columns = {name: threads.c[name] for name in THREAD_SORT_COLUMNS}
    stmt = stmt.order_by(*order_by(columns, sort_by, sort_order, tie_breaker=T.thread_id))
    return stmt.limit(limit).offset(offset)


def count_statement(
    dialect: str,
    *,
    tenant_id: str,
    metadata: JSONObject | None,
    values: JSONObject | None,
    status: str | None,
) -> Select[Any]:
    """The portable count of a search's matches."""
    return filtered(
        select(func.count()).select_from(threads),
        dialect,
        tenant_id=tenant_id,
        metadata=metadata,
        values=values,
        status=status,
    )

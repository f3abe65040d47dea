"""Statements of the ops tools: pure builders (no connection, no I/O).

`graphkeep doctor` (generic over the schema's tables), the retention sweeps, the readiness
probe, the queue gauge and the planner-statistics keeper. The sweeps, the gauge and the keeper
work across every tenant on purpose: they are operator tasks, never reachable from a request,
and a row they change is addressed by its own `tenant_id` (the documented exception to "every
statement takes the caller's tenant_id"); the keeper reads and refreshes table statistics only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    LargeBinary,
    Select,
    String,
    Table,
    Text,
    TextClause,
    Update,
    and_,
    cast,
    column,
    delete,
    func,
    select,
    table,
    text,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Delete, ReturningDelete
from sqlalchemy.types import TypeDecorator

from app.db.tables import metadata, run_events, runs, thread_events, threads
from app.statuses import ACTIVE_RUN_STATUSES, ThreadStatus

T = threads.c


def stored_type(column: Column[Any]) -> Any:
    """The type the database holds: a decorated type's `impl` (a sealed JSON column is JSON)."""
    kind = column.type
    return kind.impl if isinstance(kind, TypeDecorator) else kind


def text_columns(table: Table) -> list[Column[Any]]:
    """The columns that hold text: JSON, Text and String ones (not blobs, numbers, times)."""
    return [
        column
        for column in table.columns
        if isinstance(stored_type(column), JSON | Text | String)
        and not isinstance(stored_type(column), LargeBinary)
    ]


def scanned_tables() -> list[Table]:
    return [table for table in metadata.sorted_tables if text_columns(table)]


def raw_text_page(table: Table, dialect: str, *, limit: int, offset: int) -> Select[Any]:
    """A page of rows: the primary key as stored, and every text column as stored.

    SQLite: as raw bytes (a column read as text fails on bytes that are not UTF-8 before we
    could look). PostgreSQL holds only valid text: as text (jsonb rendered)."""
    key = list(table.primary_key.columns)
    as_type = LargeBinary if dialect == "sqlite" else Text
    raw = [cast(column, as_type).label(column.name) for column in text_columns(table)]
    keys = [c.label(f"pk_{c.name}") for c in key]
    return select(*keys, *raw).order_by(*key).limit(limit).offset(offset)


def repair_row(table: Table, key: dict[str, Any], values: dict[str, Any]) -> Update:
    """Write the repaired `values` into the row with primary key `key`."""
    conditions = [table.c[name] == value for name, value in key.items()]
    return table.update().where(*conditions).values(**values)


# --------------------------------------------------------------------------- health, gauges

# Readiness: the database answers
PING: TextClause = text("SELECT 1")


def queue_depth() -> Select[Any]:
    """(status, count) of pending and running runs, every tenant (one deployment-wide gauge)."""
    return (
        select(runs.c.status, func.count())
        .where(runs.c.status.in_(sorted(ACTIVE_RUN_STATUSES)))
        .group_by(runs.c.status)
    )


# --------------------------------------------------------------------------- thread TTL


def threads_without_ttl(limit: int) -> Select[Any]:
    """Up to `limit` threads (every tenant) with no TTL yet: the default TTL's next batch."""
    return (
        select(T.tenant_id, T.thread_id, T.updated_at)
        .where(T.ttl_minutes.is_(None), T.expires_at.is_(None))
        .limit(limit)
    )


def stamp_ttl(
    tenant_id: str, thread_id: str, *, ttl_minutes: float, strategy: str, expires_at: datetime
) -> Update:
    """Give one thread the default TTL, unless it got its own meanwhile."""
    return (
        update(threads)
        .where(T.tenant_id == tenant_id, T.thread_id == thread_id, T.ttl_minutes.is_(None))
        .values(ttl_minutes=ttl_minutes, ttl_strategy=strategy, expires_at=expires_at)
    )


def expired_threads(now: datetime, limit: int) -> Select[Any]:
    """Up to `limit` threads (every tenant) expired at `now` and not busy, oldest expiry first."""
    return (
        select(T.tenant_id, T.thread_id, T.ttl_strategy, T.ttl_minutes)
        .where(T.expires_at <= now, T.status != ThreadStatus.BUSY)
        .order_by(T.expires_at)
        .limit(limit)
    )


def delete_expired_thread(tenant_id: str, thread_id: str, now: datetime) -> ReturningDelete[Any]:
    """Delete the thread if it is still expired and not busy (a thread that got a run or a
    new TTL since it was selected survives); returns its id when it went."""
    return (
        delete(threads)
        .where(
            T.tenant_id == tenant_id,
            T.thread_id == thread_id,
            T.expires_at <= now,
            T.status != ThreadStatus.BUSY,
        )
        .returning(T.thread_id)
    )


def delete_thread_events(tenant_id: str, thread_id: str) -> list[Delete]:
    """A deleted thread's run events and thread-stream log (they carry no foreign key)."""
    return [
        delete(run_events).where(
            run_events.c.tenant_id == tenant_id, run_events.c.thread_id == thread_id
        ),
        delete(thread_events).where(
            thread_events.c.tenant_id == tenant_id, thread_events.c.thread_id == thread_id
        ),
    ]


def rearm_ttl(tenant_id: str, thread_id: str, now: datetime, expires_at: datetime | None) -> Update:
    """A pruned (keep_latest) thread's next expiry, if it is still expired at `now`."""
    return (
        update(threads)
        .where(T.tenant_id == tenant_id, T.thread_id == thread_id, T.expires_at <= now)
        .values(expires_at=expires_at)
    )


def expired_run_events(now: datetime) -> Delete:
    """Stream events (every tenant) whose retention ended at `now`."""
    return delete(run_events).where(
        and_(run_events.c.expires_at.is_not(None), run_events.c.expires_at <= now)
    )


_TABLE_STATS = table(
    "pg_stat_user_tables",
    column("relid"),
    column("relname"),
    column("schemaname"),
    column("n_live_tup"),
    column("n_mod_since_analyze"),
)
_PG_CLASS = table("pg_class", column("oid"), column("relowner"))


def grown_tables(names: list[str], floor_rows: int) -> Select[str]:
    """PostgreSQL: which of `names` (in the current schema) had at least `floor_rows` rows, and
    at least half their rows, changed since their last analysis (a table that only grew has
    doubled). Only tables this role may analyze (it has its owner's rights, or is a superuser):
    for any other, ANALYZE would only warn, every time."""
    stats = _TABLE_STATS.c
    analyzable = select(_PG_CLASS.c.oid).where(func.pg_has_role(_PG_CLASS.c.relowner, "USAGE"))
    return select(stats.relname).where(
        stats.schemaname == func.current_schema(),
        stats.relname.in_(names),
        stats.n_mod_since_analyze >= floor_rows,
        2 * stats.n_mod_since_analyze >= stats.n_live_tup,
        stats.relid.in_(analyzable),
    )


def analyze(dialect: Dialect, name: str) -> TextClause:
    """PostgreSQL: ANALYZE one of graphkeep's own tables (`name` comes from the schema's
    metadata, never from a request), skipping it if another session holds it. Text because
    SQLAlchemy Core has no ANALYZE construct; the dialect quotes the name, and it runs on the
    one data-access path (`read`) like every other statement."""
    return text(f"ANALYZE (SKIP_LOCKED) {dialect.identifier_preparer.quote(name)}")

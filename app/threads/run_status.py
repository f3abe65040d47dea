"""Thread-row changes made by the run engine, inside the caller's transaction.

The run engine creates threads for `if_not_exists=create`, marks them busy when a run is
queued, and writes status, values cache and interrupts in the same transaction as a run's final
status. Functions take the connection and never commit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.dialect import insert_for
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.errors import Conflict
from app.statuses import ACTIVE_RUN_STATUSES, ThreadStatus

_UNSET: Any = object()
# the busy rule below is the one place that says which runs keep a thread busy
_ACTIVE = sorted(ACTIVE_RUN_STATUSES)


def active_runs_on(
    thread_id: Any, tenant_id: Any, *, other_than: Any = None
) -> ColumnElement[bool]:
    """EXISTS a pending or running run on the thread (other than `other_than`, if given)."""
    conditions = [
        runs.c.thread_id == thread_id,
        runs.c.tenant_id == tenant_id,
        # equalities, not IN: an IN list is an expanding parameter, re-rendered into the SQL
        # on every execution of an otherwise cached statement (the run create's hot path)
        or_(*(runs.c.status == status for status in _ACTIVE)),
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


async def insert_thread_for_run(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    metadata: dict[str, Any],
    config: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    """Create the thread a run asked for (`if_not_exists=create`, stateless runs), already
    busy with that run.

    Raises Conflict when the id is taken, by this tenant or another.
    """
    now = now or utcnow()
    # ON CONFLICT DO NOTHING, not a caught IntegrityError: that would abort a PostgreSQL
    # transaction. A taken id (another tenant's thread, or a concurrent create) is a 409 worded
    # like any duplicate, so it reveals nothing about the owner.
    result = await conn.execute(
        insert_for(conn.dialect, threads)
        .values(
            thread_id=thread_id,
            tenant_id=tenant_id,
            status=ThreadStatus.BUSY.value,
            metadata=metadata,
            config=config or {},
            values=None,
            interrupts={},
            error=None,
            created_at=now,
            updated_at=now,
            state_updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["thread_id"])
    )
    if result.rowcount == 0:
        raise Conflict(f"Thread '{thread_id}' already exists")


async def mark_thread_busy(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    metadata: dict[str, Any],
    config: dict[str, Any],
) -> None:
    """Busy at once when a run is queued; `metadata` is the thread's new full metadata."""
    await conn.execute(
        threads.update()
        .where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
        .values(
            status=ThreadStatus.BUSY.value, metadata=metadata, config=config, updated_at=utcnow()
        )
    )


async def has_active_runs(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> bool:
    return bool((await conn.execute(select(active_runs_on(thread_id, tenant_id)))).scalar())


async def settle_thread(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    status: ThreadStatus,
    values: Any = _UNSET,
    interrupts: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> ThreadStatus | None:
    """Write the thread's state after a run ended or was cancelled; returns its new status.

    `status` is what the thread would be on its own (idle / interrupted / error); any other
    pending or running run on the thread makes it `busy` instead (`thread_status_after`).
    One statement.
    """
    now = utcnow()
    changes: dict[str, Any] = {
        "status": thread_status_after(thread_id, tenant_id, ThreadStatus(status).value),
        "updated_at": now,
        "error": error,
    }
    if values is not _UNSET:
        changes["values"] = values
        changes["interrupts"] = interrupts or {}
        changes["state_updated_at"] = now
    result = await conn.execute(
        threads.update()
        .where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
        .values(**changes)
        .returning(threads.c.status)
    )
    value = result.scalar()
    return None if value is None else ThreadStatus(value)


async def delete_thread_row(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> None:
    """Delete a (temporary) thread; its runs go with it (foreign key cascade)."""
    await conn.execute(
        threads.delete().where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
    )

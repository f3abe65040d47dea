"""Thread-row changes made by the run engine, inside the caller's transaction.

The run engine creates threads for `if_not_exists=create`, marks them busy when a run is
queued, and writes status, values cache and interrupts in the same transaction as a run's final
status. Functions take the connection and never commit; their statements are built in
app/threads/queries.py, which also holds the busy rule (`active_runs_on`,
`thread_status_after`, re-exported here for the run engine's statements).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.types import utcnow
from app.errors import Conflict
from app.statuses import ThreadStatus
from app.threads import queries as q
from app.threads.queries import active_runs_on, thread_status_after

__all__ = [
    "active_runs_on",
    "delete_thread_row",
    "has_active_runs",
    "insert_thread_for_run",
    "mark_thread_busy",
    "settle_thread",
    "thread_status_after",
]

_UNSET: Any = object()


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
    result = await conn.execute(
        q.insert_thread_for_run(
            conn.dialect.name,
            tenant_id=tenant_id,
            thread_id=thread_id,
            metadata=metadata,
            config=config or {},
            now=now or utcnow(),
        )
    )
    # A taken id (another tenant's thread, or a concurrent create) is a 409 worded like any
    # duplicate, so it reveals nothing about the owner.
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
        q.mark_thread_busy(
            tenant_id=tenant_id, thread_id=thread_id, metadata=metadata, config=config, now=utcnow()
        )
    )


async def has_active_runs(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> bool:
    return bool(
        (await conn.execute(q.HAS_ACTIVE_RUNS, q.thread_key(tenant_id, thread_id))).scalar()
    )


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
    changes: dict[str, Any] = {"error": error}
    if values is not _UNSET:
        changes["values"] = values
        changes["interrupts"] = interrupts or {}
        changes["state_updated_at"] = now
    result = await conn.execute(
        q.settle_thread(
            tenant_id=tenant_id,
            thread_id=thread_id,
            status=ThreadStatus(status).value,
            changes=changes,
            now=now,
        )
    )
    value = result.scalar()
    return None if value is None else ThreadStatus(value)


async def delete_thread_row(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> None:
    """Delete a (temporary) thread; its runs go with it (foreign key cascade)."""
    await conn.execute(q.delete_thread(tenant_id, thread_id))

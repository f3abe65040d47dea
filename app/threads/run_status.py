"""Thread-row changes made by the run engine, inside the caller's transaction.

The run engine creates threads for `if_not_exists=create`, marks them busy when a run is
queued, and writes status, values cache and interrupts in the same transaction as a run's final
status. Functions take the connection and never commit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import case, exists, select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.dialect import insert_for
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.errors import Conflict

_UNSET: Any = object()


async def lock_thread(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> Row[Any] | None:
    """The thread row, locked against concurrent run creation (PostgreSQL row lock; SQLite
    transactions already hold the single write lock)."""
    return (
        await conn.execute(
            select(threads)
            .where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
            .with_for_update()
        )
    ).first()


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
            status="busy",
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
        .values(status="busy", metadata=metadata, config=config, updated_at=utcnow())
    )


async def has_active_runs(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> bool:
    return bool(
        (
            await conn.execute(
                select(
                    exists().where(
                        runs.c.thread_id == thread_id,
                        runs.c.tenant_id == tenant_id,
                        runs.c.status.in_(("pending", "running")),
                    )
                )
            )
        ).scalar()
    )


async def settle_thread(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    thread_id: str,
    status: str,
    values: Any = _UNSET,
    interrupts: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> str | None:
    """Write the thread's state after a run ended or was cancelled; returns its new status.

    `status` is what the thread would be on its own (idle / interrupted / error); any other
    pending or running run on the thread makes it `busy` instead (busy wins). One statement.
    """
    now = utcnow()
    active = exists().where(
        runs.c.thread_id == thread_id,
        runs.c.tenant_id == tenant_id,
        runs.c.status.in_(("pending", "running")),
    )
    changes: dict[str, Any] = {
        "status": case((active, "busy"), else_=status),
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
    return None if value is None else str(value)


async def delete_thread_row(conn: AsyncConnection, *, tenant_id: str, thread_id: str) -> None:
    """Delete a (temporary) thread; its runs go with it (foreign key cascade)."""
    await conn.execute(
        threads.delete().where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
    )

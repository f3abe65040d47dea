"""The run-event store's statements (classic run streams and the classic thread stream):
pure builders, no I/O. The thread-stream protocol's own log is app/runs/threadlog/queries.py;
the settle's event insert is `finish_queries.insert_events`, reused here.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, or_, select
from sqlalchemy.sql.dml import Update

from app.db.tables import run_events, runs, threads
from app.runs.finish_queries import insert_events
from app.runs.queue_queries import owns_run

__all__ = [
    "active_or_recent_runs",
    "events_after",
    "insert_events",
    "max_seq",
    "owner_share_lock",
    "run_status",
    "set_expiry",
    "state_updates_since",
    "thread_exists",
]


def owner_share_lock(token: Any) -> Select[Any]:
    """The run row while `token`'s attempt owns it, share-locked (PostgreSQL): a reaper or a
    newer claim waits for the caller's commit, or the caller sees it and stops."""
    return select(runs.c.run_id).where(owns_run(token)).with_for_update(read=True)


def set_expiry(*, run_id: str, tenant_id: str, expires_at: datetime) -> Update:
    """Events of an ended run not yet given an expiry get one."""
    return (
        run_events.update()
        .where(run_events.c.run_id == run_id, run_events.c.tenant_id == tenant_id)
        .where(run_events.c.expires_at.is_(None))
        .values(expires_at=expires_at)
    )


def max_seq(*, run_id: str, tenant_id: str) -> Select[Any]:
    return select(func.max(run_events.c.seq)).where(
        run_events.c.run_id == run_id, run_events.c.tenant_id == tenant_id
    )


def events_after(*, run_id: str, tenant_id: str, after: int, limit: int) -> Select[Any]:
    """The run's stored events with seq > `after`, oldest first, at most `limit`."""
    return (
        select(run_events.c.seq, run_events.c.event, run_events.c.data)
        .where(
            run_events.c.run_id == run_id,
            run_events.c.tenant_id == tenant_id,
            run_events.c.seq > after,
        )
        .order_by(run_events.c.seq)
        .limit(limit)
    )


def run_status(*, run_id: str, tenant_id: str) -> Select[Any]:
    return select(runs.c.status).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)


def thread_exists(*, thread_id: str, tenant_id: str) -> Select[Any]:
    return select(threads.c.thread_id).where(
        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
    )


def active_or_recent_runs(
    *, thread_id: str, tenant_id: str, since: datetime, active: Collection[str]
) -> Select[Any]:
    """The thread's runs created at or after `since`, and any still in `active` statuses."""
    return select(runs.c.run_id, runs.c.created_at, runs.c.status).where(
        runs.c.thread_id == thread_id,
        runs.c.tenant_id == tenant_id,
        or_(runs.c.created_at >= since, runs.c.status.in_(list(active))),
    )


def state_updates_since(
    *, thread_id: str, tenant_id: str, since: datetime, event: str
) -> Select[Any]:
    """The thread's `event` rows (its state updates) created at or after `since`."""
    return select(run_events.c.run_id, run_events.c.created_at, run_events.c.data).where(
        run_events.c.thread_id == thread_id,
        run_events.c.tenant_id == tenant_id,
        run_events.c.event == event,
        run_events.c.created_at >= since,
    )

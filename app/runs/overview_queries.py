"""The console's overview of runs (app/runs/overview.py): pure statement builders, as
app/runs/queries.py. Each takes the tenant: a worker shows when it holds a lease on one of
the tenant's runs. The reads are small (bounded lists, grouped counts on indexed columns).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select

from app.db.tables import runs
from app.statuses import ACTIVE_RUN_STATUSES, RunStatus

ACTIVE_STATUSES = [s.value for s in sorted(ACTIVE_RUN_STATUSES)]  # pending, running
FAILED_STATUSES = (RunStatus.ERROR.value, RunStatus.TIMEOUT.value)

_LIST_COLUMNS = (
    runs.c.run_id,
    runs.c.thread_id,
    runs.c.graph_id,
    runs.c.status,
    runs.c.attempt,
    runs.c.worker_id,
    runs.c.lease_expires_at,
    runs.c.created_at,
    runs.c.started_at,
    runs.c.ended_at,
)


def active_counts(tenant_id: str) -> Select[Any]:
    """(status, count) of the tenant's pending and running runs (absent: none)."""
    return (
        select(runs.c.status, func.count())
        .where(runs.c.tenant_id == tenant_id, runs.c.status.in_(ACTIVE_STATUSES))
        .group_by(runs.c.status)
    )


def active_runs(tenant_id: str, limit: int) -> Select[Any]:
    """The tenant's newest pending and running runs."""
    return (
        select(*_LIST_COLUMNS)
        .where(runs.c.tenant_id == tenant_id, runs.c.status.in_(ACTIVE_STATUSES))
        .order_by(runs.c.created_at.desc())
        .limit(limit)
    )


def leasing_workers(tenant_id: str, now: datetime) -> Select[Any]:
    """The workers holding an unexpired lease on the tenant's runs: how many, until when."""
    return (
        select(
            runs.c.worker_id,
            func.count().label("runs"),
            func.max(runs.c.lease_expires_at).label("lease_expires_at"),
        )
        .where(
            runs.c.tenant_id == tenant_id,
            runs.c.status == RunStatus.RUNNING.value,
            runs.c.worker_id.is_not(None),
            runs.c.lease_expires_at > now,
        )
        .group_by(runs.c.worker_id)
        .order_by(runs.c.worker_id)
    )


def failed_runs(tenant_id: str, limit: int) -> Select[Any]:
    """The tenant's newest runs that ended `error` or `timeout`, with their error."""
    return (
        select(*_LIST_COLUMNS, runs.c.error)
        .where(runs.c.tenant_id == tenant_id, runs.c.status.in_(FAILED_STATUSES))
        .order_by(runs.c.created_at.desc())
        .limit(limit)
    )

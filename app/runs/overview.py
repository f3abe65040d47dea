"""What the console's overview shows about runs: in flight, queued, workers, failures.

Everything is scoped to one tenant: a worker appears when it holds a lease on one of the
tenant's runs. The reads are small (bounded lists and a grouped count on indexed columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.db.tables import runs
from app.db.types import utcnow
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


@dataclass
class RunsOverview:
    counts: dict[str, int]  # pending / running
    active: list[dict[str, Any]]
    workers: list[dict[str, Any]]  # worker_id, runs, lease_expires_at
    failures: list[dict[str, Any]]


def _rows(result: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in result.mappings()]


async def runs_overview(engine: AsyncEngine, *, tenant_id: str, limit: int = 20) -> RunsOverview:
    mine = runs.c.tenant_id == tenant_id
    async with read(engine) as conn:
        counts = dict.fromkeys(ACTIVE_STATUSES, 0)
        grouped = await conn.execute(
            select(runs.c.status, func.count())
            .where(mine, runs.c.status.in_(ACTIVE_STATUSES))
            .group_by(runs.c.status)
        )
        for status, count in grouped:
            counts[str(status)] = int(count)
        active = _rows(
            await conn.execute(
                select(*_LIST_COLUMNS)
                .where(mine, runs.c.status.in_(ACTIVE_STATUSES))
                .order_by(runs.c.created_at.desc())
                .limit(limit)
            )
        )
        workers = _rows(
            await conn.execute(
                select(
                    runs.c.worker_id,
                    func.count().label("runs"),
                    func.max(runs.c.lease_expires_at).label("lease_expires_at"),
                )
                .where(
                    mine,
                    runs.c.status == RunStatus.RUNNING.value,
                    runs.c.worker_id.is_not(None),
                    runs.c.lease_expires_at > utcnow(),
                )
                .group_by(runs.c.worker_id)
                .order_by(runs.c.worker_id)
            )
        )
        failures = _rows(
            await conn.execute(
                select(*_LIST_COLUMNS, runs.c.error)
                .where(mine, runs.c.status.in_(FAILED_STATUSES))
                .order_by(runs.c.created_at.desc())
                .limit(limit)
            )
        )
    return RunsOverview(counts=counts, active=active, workers=workers, failures=failures)

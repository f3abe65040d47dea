"""What the console's overview shows about runs: in flight, queued, workers, failures.

Everything is scoped to one tenant: a worker appears when it holds a lease on one of the
tenant's runs. The reads are small (bounded lists and a grouped count on indexed columns);
they are built in app/runs/overview_queries.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read
from app.db.types import utcnow
from app.runs import overview_queries as q
from app.runs.overview_queries import ACTIVE_STATUSES


@dataclass
class RunsOverview:
    counts: dict[str, int]  # pending / running
    active: list[dict[str, Any]]
    workers: list[dict[str, Any]]  # worker_id, runs, lease_expires_at
    failures: list[dict[str, Any]]


def _rows(result: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in result.mappings()]


async def runs_overview(engine: AsyncEngine, *, tenant_id: str, limit: int = 20) -> RunsOverview:
    async with read(engine) as conn:
        counts = dict.fromkeys(ACTIVE_STATUSES, 0)
        for status, count in await conn.execute(q.active_counts(tenant_id)):
            counts[str(status)] = int(count)
        active = _rows(await conn.execute(q.active_runs(tenant_id, limit)))
        workers = _rows(await conn.execute(q.leasing_workers(tenant_id, utcnow())))
        failures = _rows(await conn.execute(q.failed_runs(tenant_id, limit)))
    return RunsOverview(counts=counts, active=active, workers=workers, failures=failures)

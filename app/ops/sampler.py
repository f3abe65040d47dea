"""Gauges sampled at scrape time: queue depth and connection-pool usage."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.access import read
from app.ops import queries
from app.statuses import RunStatus

log = logging.getLogger(__name__)

SAMPLE_TIMEOUT_SECONDS = 2.0


def sample_pool(engine: AsyncEngine) -> None:
    """Record this process's pool usage (pools without counters, e.g. NullPool, report 0)."""
    pool = engine.sync_engine.pool
    checked_out = getattr(pool, "checkedout", None)
    checked_in = getattr(pool, "checkedin", None)
    in_use = int(checked_out()) if callable(checked_out) else 0
    idle = int(checked_in()) if callable(checked_in) else 0
    metrics.set_db_pool(in_use, in_use + idle)


async def sample_queue(engine: AsyncEngine, *, timeout_seconds: float) -> bool:
    """Count pending and running runs; False (gauges untouched) if the database is slow or down.

    The queue spans tenants on purpose: it is one deployment-wide gauge with no labels.
    """
    query = queries.queue_depth()
    try:
        async with asyncio.timeout(min(timeout_seconds, SAMPLE_TIMEOUT_SECONDS)):
            async with read(engine) as conn:
                counts = {str(status): int(n) for status, n in (await conn.execute(query)).all()}
    except Exception as exc:  # a scrape must succeed even when the database does not
        log.info("metrics: queue not sampled", extra={"error": type(exc).__name__})
        return False
    metrics.set_queue_depth(counts.get(RunStatus.PENDING, 0), counts.get(RunStatus.RUNNING, 0))
    return True

"""Retention of the per-thread event log (contract section 8).

The log goes with its thread (delete, prune `delete`, TTL `delete`: app/threads/queries.py and
app/ops/retention.py delete the rows). Short of that it is trimmed from the front, never in
the middle: prune `keep_latest` (API and TTL) and the age sweep remove every event older than
the first one that must stay, which is

- every event of the thread's newest run (its events hold the max seq the next append counts
  from, and an interrupted thread's pending interrupt ids are only learnt from its replayed
  `input.requested`),
- every event of a run still pending or running,
- for the age sweep, every event younger than the stream-event retention.

The newest removed row is kept as a tombstone (`queries.TRIMMED`), so a reader knows exactly
which cursors lost events: `since` below the tombstone's seq gets `resume_gap`, never a
silently shorter replay (log.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction
from app.runs.threadlog import queries
from app.runs.threadlog.codec import encode_payload

log = logging.getLogger(__name__)

SWEEP_BATCH = 200


async def trim(
    engine: AsyncEngine, *, tenant_id: str, thread_id: str, older_than: datetime | None = None
) -> int:
    """Trim one thread's log from the front (see the module doc); the rows removed."""
    async with transaction(engine) as conn:
        keep_run = (
            await conn.execute(queries.last_event_run(tenant_id=tenant_id, thread_id=thread_id))
        ).scalar()
        keep_from = (
            await conn.execute(
                queries.first_kept_seq(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    keep_run=keep_run,
                    older_than=older_than,
                )
            )
        ).scalar()
        if keep_from is None:
            return 0  # empty, or nothing but a tombstone
        point = (
            await conn.execute(
                queries.trim_point(tenant_id=tenant_id, thread_id=thread_id, below=int(keep_from))
            )
        ).first()
        if point is None:
            return 0
        seq = int(point.seq)
        removed = (
            await conn.execute(
                queries.delete_below(tenant_id=tenant_id, thread_id=thread_id, seq=seq)
            )
        ).rowcount or 0
        if point.method != queries.TRIMMED:
            await conn.execute(
                queries.mark_trimmed(
                    tenant_id=tenant_id, thread_id=thread_id, seq=seq, data=encode_payload(None)
                )
            )
            removed += 1
    return int(removed)


async def trim_threads(engine: AsyncEngine, *, tenant_id: str, thread_ids: Iterable[str]) -> int:
    """Prune `keep_latest`: each of the caller's threads keeps its newest run's events."""
    removed = 0
    for thread_id in dict.fromkeys(thread_ids):
        removed += await trim(engine, tenant_id=tenant_id, thread_id=thread_id)
    return removed


async def sweep_logs(engine: AsyncEngine, *, cutoff: datetime) -> int:
    """Trim every thread's events older than `cutoff` (those that may go); rows removed."""
    removed = 0
    after: tuple[str, str] | None = None
    while True:
        async with read(engine) as conn:
            rows = (
                await conn.execute(
                    queries.threads_with_events_before(
                        cutoff=cutoff, after=after, limit=SWEEP_BATCH
                    )
                )
            ).all()
        for row in rows:
            removed += await trim(
                engine, tenant_id=row.tenant_id, thread_id=row.thread_id, older_than=cutoff
            )
        if len(rows) < SWEEP_BATCH:
            return removed
        after = (rows[-1].tenant_id, rows[-1].thread_id)


def log_trimmer(engine: AsyncEngine) -> Callable[[str, str], Awaitable[int]]:
    """`trim` as the TTL sweeper takes it (app/ops/retention.py, a sibling layer)."""

    async def trim_one(tenant_id: str, thread_id: str) -> int:
        return await trim(engine, tenant_id=tenant_id, thread_id=thread_id)

    return trim_one


def log_sweeper(engine: AsyncEngine) -> Callable[[datetime], Awaitable[int]]:
    """`sweep_logs` as the stream-event sweeper takes it."""

    async def sweep(cutoff: datetime) -> int:
        return await sweep_logs(engine, cutoff=cutoff)

    return sweep

"""The runs table as a queue: atomic claim, leases and their renewal, the expired-lease reaper.

A worker claims the oldest eligible pending run (`available_at <= now`) whose thread has no
running run and no older pending run, so a thread runs one run at a time in creation order.
The claim holds a lease (`lease_expires_at`) that the worker renews while the run executes; a
run whose lease expired (its worker died) is put back to pending and claimed again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, exists, func, or_, select, type_coerce
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db import sealed
from app.db.dialect import lock_for_claim, single_statement_autocommit
from app.db.tables import runs
from app.db.types import JSONType, utcnow

log = logging.getLogger(__name__)

ACTIVE_STATUSES = ("pending", "running")


@dataclass(frozen=True)
class ClaimedRun:
    run_id: str
    tenant_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    kwargs: dict[str, Any]
    metadata: dict[str, Any]
    attempt: int
    temporary: bool
    cancel_action: str | None
    created_at: datetime


@dataclass(frozen=True)
class LeaseState:
    held: bool  # False: the run was deleted, finished or taken over
    cancel_action: str | None


_CLAIM_STATEMENTS: dict[str, Any] = {}


def _claim_statement(dialect_name: str) -> Any:
    """The claim UPDATE, built once per dialect (bound: p_now, p_lease_until, p_worker)."""
    cached = _CLAIM_STATEMENTS.get(dialect_name)
    if cached is not None:
        return cached
    now = bindparam("p_now", type_=runs.c.available_at.type)
    cand = runs.alias("cand")
    other = runs.alias("other")
    blocked = exists(
        select(other.c.run_id).where(
            other.c.thread_id == cand.c.thread_id,
            other.c.run_id != cand.c.run_id,
            or_(
                other.c.status == "running",
                and_(other.c.status == "pending", other.c.created_at < cand.c.created_at),
            ),
        )
    )
    candidate = (
        select(cand.c.run_id)
        .where(cand.c.status == "pending", cand.c.available_at <= now, ~blocked)
        .order_by(cand.c.created_at, cand.c.run_id)
        .limit(1)
    )
    candidate = lock_for_claim(dialect_name, candidate)
    stmt = (
        runs.update()
        .where(runs.c.run_id == candidate.scalar_subquery(), runs.c.status == "pending")
        .values(
            status="running",
            worker_id=bindparam("p_worker"),
            lease_expires_at=bindparam("p_lease_until", type_=runs.c.lease_expires_at.type),
            attempt=runs.c.attempt + 1,
            started_at=func.coalesce(runs.c.started_at, now),
            updated_at=now,
        )
        .returning(
            runs.c.run_id,
            runs.c.tenant_id,
            runs.c.thread_id,
            runs.c.assistant_id,
            runs.c.graph_id,
            # as stored: opened after the claim committed (see `claim`)
            type_coerce(runs.c.kwargs, JSONType).label("kwargs"),
            runs.c.metadata,
            runs.c.attempt,
            runs.c.temporary,
            runs.c.cancel_action,
            runs.c.created_at,
            runs.c.available_at,
        )
    )
    _CLAIM_STATEMENTS[dialect_name] = stmt
    return stmt


@asynccontextmanager
async def one_statement(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection for a single atomic write: autocommit on PostgreSQL (no BEGIN/COMMIT
    round trips), the engine's write transaction on SQLite."""
    if single_statement_autocommit(engine.dialect):
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn
    else:
        async with engine.begin() as conn:
            yield conn


async def claim(engine: AsyncEngine, *, worker_id: str, lease_seconds: float) -> ClaimedRun | None:
    """Claim the next eligible run for `worker_id`, or None if there is none."""
    now = utcnow()
    params = {
        "p_now": now,
        "p_lease_until": now + timedelta(seconds=lease_seconds),
        "p_worker": worker_id,
    }
    async with one_statement(engine) as conn:
        row = (await conn.execute(_claim_statement(conn.dialect.name), params)).first()
    if row is None:
        return None
    metrics.observe_queue_wait(row.graph_id, (now - row.available_at).total_seconds())
    try:
        kwargs = sealed.open_json(row.kwargs)
    except sealed.DecryptionFailed as exc:
        # Opened after the claim committed: on SQLite a failure inside the claim would roll
        # it back and the same oldest run would block the queue at every poll. Left running
        # unexecuted, it is recovered when its lease expires, within the attempt limit.
        log.error(
            "claimed run cannot be read with the configured encryption keys",
            extra={"run_id": row.run_id, "attempt": row.attempt, "reason": exc.detail},
        )
        return None
    return ClaimedRun(
        run_id=row.run_id,
        tenant_id=row.tenant_id,
        thread_id=row.thread_id,
        assistant_id=row.assistant_id,
        graph_id=row.graph_id,
        kwargs=dict(kwargs),
        metadata=dict(row.metadata),
        attempt=row.attempt,
        temporary=bool(row.temporary),
        cancel_action=row.cancel_action,
        created_at=row.created_at,
    )


async def renew(
    engine: AsyncEngine, *, run_id: str, worker_id: str, lease_seconds: float
) -> LeaseState:
    """Extend the lease; also reports a cancel asked for meanwhile."""
    async with one_statement(engine) as conn:
        row = (
            await conn.execute(
                runs.update()
                .where(
                    runs.c.run_id == run_id,
                    runs.c.worker_id == worker_id,
                    runs.c.status == "running",
                )
                .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds))
                .returning(runs.c.cancel_action)
            )
        ).first()
    if row is None:
        return LeaseState(held=False, cancel_action=None)
    return LeaseState(held=True, cancel_action=row.cancel_action)


async def release(conn: AsyncConnection, *, run_id: str, worker_id: str) -> bool:
    """Hand a claimed run back to the queue (drain); any worker may claim it at once."""
    now = utcnow()
    result = await conn.execute(
        runs.update()
        .where(runs.c.run_id == run_id, runs.c.worker_id == worker_id, runs.c.status == "running")
        .values(
            status="pending",
            worker_id=None,
            lease_expires_at=None,
            available_at=now,
            updated_at=now,
        )
    )
    return bool(result.rowcount)


async def reap_expired(engine: AsyncEngine) -> list[str]:
    """Put runs whose lease expired back to pending; returns their ids."""
    now = utcnow()
    async with one_statement(engine) as conn:
        rows = await conn.execute(
            runs.update()
            .where(runs.c.status == "running", runs.c.lease_expires_at < now)
            .values(
                status="pending",
                worker_id=None,
                lease_expires_at=None,
                available_at=now,
                updated_at=now,
            )
            .returning(runs.c.run_id, runs.c.graph_id)
        )
        reaped = rows.all()
    for row in reaped:
        metrics.count_run_recovered(row.graph_id)
    return [r.run_id for r in reaped]

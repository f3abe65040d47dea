"""The runs table as a queue: atomic claim, leases and their renewal, the expired-lease reaper.

A worker claims the oldest eligible pending run (`available_at <= now`) whose thread has no
running run and no older pending run, so a thread runs one run at a time in creation order.
The claim holds a lease (`lease_expires_at`) that the worker renews while the run executes; a
run whose lease expired is put back to pending and claimed again.

Dead workers are noticed before their lease runs out (`reap_expired`): on PostgreSQL each
worker process holds a session-level advisory lock keyed by its worker id
(`queue_queries.liveness_lock`) on a connection of its own, which the server drops the moment
that connection dies (process killed, host gone: at the latest when TCP keepalives give up); a
running run whose worker holds no such lock is reclaimed at once. On SQLite (one host) a run
whose worker id names a process of this host that no longer exists is reclaimed at once. The
lease stays the backstop for stalls and partitions, and the fencing token
(app/runs/fencing.py) keeps a worker that was wrongly presumed dead from writing anything once
its run was reclaimed. The statements are built in app/runs/queue_queries.py.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db import sealed
from app.db.access import read, transaction
from app.db.types import utcnow
from app.runs import queue_queries

log = logging.getLogger(__name__)


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


async def claim(engine: AsyncEngine, *, worker_id: str, lease_seconds: float) -> ClaimedRun | None:
    """Claim the next eligible run for `worker_id`, or None if there is none."""
    now = utcnow()
    params = {
        "p_now": now,
        "p_lease_until": now + timedelta(seconds=lease_seconds),
        "p_worker": worker_id,
    }
    async with transaction(engine, one_statement=True) as conn:
        row = (await conn.execute(queue_queries.claim(conn.dialect.name), params)).first()
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
    engine: AsyncEngine,
    *,
    run_id: str,
    worker_id: str,
    lease_seconds: float,
    attempt: int | None = None,
) -> LeaseState:
    """Extend the lease; also reports a cancel asked for meanwhile. With `attempt`, only
    that attempt's lease (a superseded attempt's renewal changes nothing)."""
    until = utcnow() + timedelta(seconds=lease_seconds)
    async with transaction(engine, one_statement=True) as conn:
        statement = queue_queries.renew(with_attempt=attempt is not None)
        params = queue_queries.lease_params(run_id, worker_id, attempt, until)
        row = (await conn.execute(statement, params)).first()
    if row is None:
        return LeaseState(held=False, cancel_action=None)
    return LeaseState(held=True, cancel_action=row.cancel_action)


async def release(
    conn: AsyncConnection, *, run_id: str, worker_id: str, attempt: int | None = None
) -> bool:
    """Hand a claimed run back to the queue (drain); any worker may claim it at once. With
    `attempt`, only while that attempt owns the run."""
    statement = queue_queries.release(with_attempt=attempt is not None)
    result = await conn.execute(
        statement, queue_queries.lease_params(run_id, worker_id, attempt, utcnow())
    )
    return bool(result.rowcount)


# Worker pools alive in this process (several apps may share one process, e.g. in tests)
_LIVE_HERE: set[str] = set()


def register_live_worker(worker_id: str, *, alive: bool) -> None:
    """A worker pool of this process started (alive) or stopped."""
    if alive:
        _LIVE_HERE.add(worker_id)
    else:
        _LIVE_HERE.discard(worker_id)


def dead_local_workers(worker_ids: list[str], *, own_worker_id: str) -> list[str]:
    """Worker ids (`host:pid:nonce`) naming a process of this host that is gone: no such
    pid, or the pid is this process under a nonce none of its pools has (an earlier boot:
    a restarted container's pid 1)."""
    host = socket.gethostname()
    dead = []
    for worker_id in worker_ids:
        w_host, _, rest = worker_id.partition(":")
        pid_text, _, _nonce = rest.partition(":")
        if w_host != host or not pid_text.isdigit() or worker_id == own_worker_id:
            continue
        if worker_id in _LIVE_HERE:
            continue
        pid = int(pid_text)
        if pid == os.getpid() or not _pid_alive(pid):
            dead.append(worker_id)
    return dead


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


async def reap_expired(engine: AsyncEngine, *, own_worker_id: str | None = None) -> list[str]:
    """Put runs whose lease expired back to pending; returns their ids. Given the calling
    worker's id (a `WorkerPool` holding its liveness lock), also runs of dead workers
    (module docstring)."""
    now = utcnow()
    dead: list[str] = []
    liveness_locks = own_worker_id is not None and engine.dialect.name == "postgresql"
    if own_worker_id is not None and not liveness_locks:
        async with read(engine) as conn:
            holders = (await conn.execute(queue_queries.running_worker_ids())).scalars()
            dead = dead_local_workers(list(holders), own_worker_id=own_worker_id)
    statement = queue_queries.reap(liveness_locks=liveness_locks, dead_workers=bool(dead))
    async with transaction(engine, one_statement=True) as conn:
        reaped = (await conn.execute(statement, queue_queries.reap_params(now, dead))).all()
    for row in reaped:
        metrics.count_run_recovered(row.graph_id)
    return [r.run_id for r in reaped]

"""The queue's SQL and the fence: pure statement builders (no connection, no I/O, no commit).

The runs table is the queue (app/runs/queue.py): the claim, the lease's renewal and release,
the reaper with its liveness tests (PostgreSQL advisory locks, SQLite dead pids), the
worker's event sweep and the pings of session-long connections. And the fencing predicates
every write of a run attempt is made conditional on (app/runs/fencing.py re-exports them
with the token). As in app/runs/queries.py: builders whose shape never changes are cached,
values come as bound parameters.

This module imports nothing of app.runs, so the token's module can re-export the predicates
without an import cycle: a token is anything with `run_id` and `attempt`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    and_,
    bindparam,
    cast,
    column,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    type_coerce,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import Delete, Update

from app.db.dialect import lock_for_claim, one_of
from app.db.tables import run_events, runs
from app.db.types import JSONType
from app.statuses import RunStatus

# --------------------------------------------------------------------------- fence

# the statuses in which a run still has an owner whose writes may count
OWNED_STATUSES = (RunStatus.RUNNING.value,)

# Bound names of the token in statements compiled once and run with `fencing.fence_params`
# (the saver view's pre-compiled writes, the PostgreSQL settle statement).
FENCE_RUN_ID = "fence_run_id"
FENCE_ATTEMPT = "fence_attempt"


class Token(Protocol):
    """A fencing token (`fencing.FencingToken`): the attempt `(run_id, attempt)`."""

    @property
    def run_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...


def owns_run_bound() -> ColumnElement[bool]:
    """`owns_run` with the token as bound parameters (`fence_params`), for a statement
    compiled once and executed for many attempts."""
    return and_(
        runs.c.run_id == bindparam(FENCE_RUN_ID, type_=runs.c.run_id.type),
        runs.c.attempt == bindparam(FENCE_ATTEMPT, type_=runs.c.attempt.type),
        one_of(runs.c.status, OWNED_STATUSES),
    )


def owns_run(token: Token) -> ColumnElement[bool]:
    """A predicate over `runs`: the row is this attempt's and the run is still running."""
    return and_(
        runs.c.run_id == token.run_id,
        runs.c.attempt == token.attempt,
        one_of(runs.c.status, OWNED_STATUSES),
    )


def still_owned(token: Token) -> ColumnElement[bool]:
    """`EXISTS (...)` of `owns_run`, to make an INSERT ... SELECT or an UPDATE conditional."""
    return exists(select(runs.c.run_id).where(owns_run(token)))


# --------------------------------------------------------------------------- claim / lease


def _sql_constant(status: str) -> ColumnElement[str]:
    """A run status as an SQL string literal in the statement's text."""
    if not status.isidentifier():  # our enum's values: nothing to quote or escape
        raise ValueError(f"not a plain status name: {status!r}")
    return literal_column(f"'{status}'", runs.c.status.type)


@functools.cache
def claim(dialect_name: str) -> Update:
    """The claim: the oldest eligible pending run whose thread has no running run and no
    older pending run, made running under the caller's lease (bound: p_now, p_lease_until,
    p_worker). PostgreSQL skips rows other claimers locked; SQLite's write lock serialises."""
    now = bindparam("p_now", type_=runs.c.available_at.type)
    # The statuses and the limit are written into the SQL text when it is compiled, not bound:
    # with them as parameters PostgreSQL's generic plan must guess how many runs are pending (a
    # fifth of the table, not the few there are), finds itself costlier than a plan for the
    # actual values, and plans the claim afresh on almost every call (3,581 plans in 4,099
    # claims, 0.47 ms each). Not `literal_execute`: SQLAlchemy renders that on every execution.
    pending = _sql_constant(RunStatus.PENDING.value)
    running = _sql_constant(RunStatus.RUNNING.value)
    cand = runs.alias("cand")
    other = runs.alias("other")
    blocked = exists(
        select(other.c.run_id).where(
            other.c.thread_id == cand.c.thread_id,
            other.c.run_id != cand.c.run_id,
            or_(
                other.c.status == running,
                and_(other.c.status == pending, other.c.created_at < cand.c.created_at),
            ),
        )
    )
    candidate = (
        select(cand.c.run_id)
        .where(cand.c.status == pending, cand.c.available_at <= now, ~blocked)
        .order_by(cand.c.created_at, cand.c.run_id)
        .limit(literal_column("1", Integer()))
    )
    candidate = lock_for_claim(dialect_name, candidate)
    return (
        runs.update()
        .where(
            runs.c.run_id == candidate.scalar_subquery(),
            runs.c.status == RunStatus.PENDING.value,
        )
        .values(
            status=RunStatus.RUNNING.value,
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
            # as stored: opened after the claim committed (see `queue.claim`)
            type_coerce(runs.c.kwargs, JSONType).label("kwargs"),
            runs.c.metadata,
            runs.c.attempt,
            runs.c.temporary,
            runs.c.cancel_action,
            runs.c.created_at,
            runs.c.available_at,
        )
    )


# The lease statements run every few seconds per running run and the reaper once a second
# per worker; built once with their values bound (`p_*`), they cost no construction and no
# cache-key walk per execution (building the reaper's pg_locks test took longer than its
# round trip). `lease_params` / `reap_params` give the values.


def _held(with_attempt: bool) -> ColumnElement[bool]:
    """The run is running under the bound worker (and, with the attempt, that fencing
    token's attempt)."""
    held = and_(
        runs.c.run_id == bindparam("p_run_id", type_=runs.c.run_id.type),
        runs.c.worker_id == bindparam("p_worker", type_=runs.c.worker_id.type),
        runs.c.status == RunStatus.RUNNING.value,
    )
    if not with_attempt:
        return held
    return and_(held, runs.c.attempt == bindparam("p_attempt", type_=runs.c.attempt.type))


def lease_params(
    run_id: str, worker_id: str, attempt: int | None, when: datetime
) -> dict[str, Any]:
    """The values of `renew` (`when`: the new lease end) and `release` (`when`: now)."""
    params: dict[str, Any] = {"p_run_id": run_id, "p_worker": worker_id, "p_when": when}
    if attempt is not None:
        params["p_attempt"] = attempt
    return params


def _when() -> Any:
    return bindparam("p_when", type_=runs.c.lease_expires_at.type)


@functools.cache
def renew(*, with_attempt: bool) -> Update:
    """Extend the lease to `p_when` while the worker (and attempt) holds the run; returns
    the cancel asked for meanwhile (`lease_params`)."""
    return (
        runs.update()
        .where(_held(with_attempt))
        .values(lease_expires_at=_when())
        .returning(runs.c.cancel_action)
    )


def _back_to_pending(now: Any) -> dict[str, Any]:
    """A claimed run handed back to the queue: any worker may claim it at once."""
    return {
        "status": RunStatus.PENDING.value,
        "worker_id": None,
        "lease_expires_at": None,
        "available_at": now,
        "updated_at": now,
    }


@functools.cache
def release(*, with_attempt: bool) -> Update:
    """Hand the run back to the queue at `p_when` while the worker (and attempt) holds it
    (`lease_params`)."""
    return runs.update().where(_held(with_attempt)).values(_back_to_pending(_when()))


def running_worker_ids() -> Select[Any]:
    return (
        select(runs.c.worker_id)
        .where(runs.c.status == RunStatus.RUNNING.value, runs.c.worker_id.is_not(None))
        .distinct()
    )


def reap_params(now: datetime, dead_workers: Sequence[str]) -> dict[str, Any]:
    """The values of `reap` (the dead workers only where it tests them)."""
    params: dict[str, Any] = {"p_now": now}
    if dead_workers:
        params["p_dead"] = list(dead_workers)
    return params


@functools.cache
def reap(*, liveness_locks: bool, dead_workers: bool) -> Update:
    """Running runs that are lost back to pending (`reap_params`): lease expired before
    `p_now`, or (`liveness_locks`, PostgreSQL) the worker holds no liveness lock, or
    (`dead_workers`) the worker is one of `p_dead` (SQLite: a process of this host that is
    gone, `queue.dead_local_workers`)."""
    now = bindparam("p_now", type_=runs.c.lease_expires_at.type)
    lost = runs.c.lease_expires_at < now
    if liveness_locks:
        lost = or_(lost, ~_worker_alive_pg())
    if dead_workers:
        lost = or_(lost, runs.c.worker_id.in_(bindparam("p_dead", expanding=True)))
    return (
        runs.update()
        .where(runs.c.status == RunStatus.RUNNING.value, lost)
        .values(_back_to_pending(now))
        .returning(runs.c.run_id, runs.c.graph_id)
    )


def expired_events(now: datetime) -> Delete:
    """The event rows past their expiry (the worker's periodic sweep)."""
    return delete(run_events).where(
        run_events.c.expires_at.is_not(None), run_events.c.expires_at < now
    )


# --------------------------------------------------------------------------- liveness

# PostgreSQL's lock table, for the advisory locks of live workers
_PG_LOCKS = table(
    "pg_locks",
    column("locktype"),
    column("classid"),
    column("objid"),
    column("objsubid"),
    column("granted"),
)
_LOW_32 = 0xFFFFFFFF


def _worker_key(worker_id: Any) -> Any:
    """The advisory lock key of a worker id (a bigint hash, computed by the server)."""
    return func.hashtextextended(worker_id, 0)


def liveness_lock(worker_id: str) -> Select[Any]:
    """`SELECT pg_advisory_lock(key)`: held for as long as the session lives."""
    return select(func.pg_advisory_lock(_worker_key(literal(worker_id))))


def _worker_alive_pg() -> ColumnElement[bool]:
    """The run's worker holds its liveness lock (a bigint advisory lock shows in `pg_locks`
    as classid = high 32 bits, objid = low 32 bits, objsubid = 1)."""
    key = _worker_key(runs.c.worker_id)
    locks = _PG_LOCKS.c
    return exists(
        select(literal(1))
        .select_from(_PG_LOCKS)
        .where(
            locks.locktype == "advisory",
            locks.granted.is_(True),
            locks.objsubid == 1,
            cast(locks.classid, BigInteger) == key.op(">>")(32).op("&")(_LOW_32),
            cast(locks.objid, BigInteger) == key.op("&")(_LOW_32),
        )
    )


# --------------------------------------------------------------------------- pings


@functools.cache
def ping() -> Select[Any]:
    """`SELECT 1`: is a session-long connection (the worker's liveness lock, the LISTEN
    connection) still there."""
    return select(1)


@functools.cache
def ping_sql() -> str:
    """`ping` as SQL text, for the LISTEN connection, which is pinged through asyncpg
    itself (app/runs/listener.py: the connection is the driver's, checked out for good)."""
    return str(
        ping().compile(
            dialect=postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
            compile_kwargs={"literal_binds": True},
        )
    )

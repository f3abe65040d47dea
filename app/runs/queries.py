"""The runs domain's SQL: pure statement builders (no connection, no I/O, no commit).

The statements of the run engine, by concern:

- here: the create statements, the reads, the cancel writes, the NOTIFY and the webhook's
  reads and record;
- app/runs/queue_queries.py: the queue (claim, renew, release, reap, liveness locks, the
  event sweep) and the fencing predicates (`owns_run`, re-exported by app/runs/fencing.py);
- app/runs/finish_queries.py: the end of a run (its settle);
- app/runs/overview_queries.py: the console's overview of runs;
- app/runs/threadlog/queries.py: the thread stream's log.

Builders whose shape never changes are cached (`functools.cache`), so SQLAlchemy's compiled
cache and asyncpg's prepared statements see one statement object each. Values come as bound
parameters; prefixes (`r_` run, `t_` thread, `e_` end) keep them apart from the column names
SQLAlchemy reserves in VALUES / SET.

The busy rule is written once, in app/threads/run_status.py (`thread_status_after`), and
used here by PostgreSQL's one-statement settle as by the SQLite transaction.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
)
from sqlalchemy.sql.dml import Delete, Insert, Update
from sqlalchemy.sql.elements import TextClause

from app.db.dialect import (
    insert_for,
    notify_channel_sql,
    single_statement_autocommit,
)
from app.db.tables import (
    SYSTEM_TENANT,
    assistants,
    checkpoints,
    runs,
    threads,
    webhook_deliveries,
)
from app.runs.fencing import FencingToken
from app.runs.queue_queries import owns_run
from app.statuses import ACTIVE_RUN_STATUSES, RunStatus, ThreadStatus
from app.threads.run_status import active_runs_on

# the columns a create writes, in order (both tables' rows come as `t_*` / `r_*` binds)
THREAD_COLUMNS = (
    "thread_id",
    "tenant_id",
    "status",
    "metadata",
    "config",
    "values",
    "interrupts",
    "error",
    "created_at",
    "updated_at",
    "state_updated_at",
)
RUN_COLUMNS = (
    "run_id",
    "tenant_id",
    "thread_id",
    "assistant_id",
    "graph_id",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
    "created_at",
    "updated_at",
    "available_at",
    "attempt",
    "temporary",
    "worker_id",
    "lease_expires_at",
    "started_at",
)
_ACTIVE = sorted(ACTIVE_RUN_STATUSES)


# --------------------------------------------------------------------------- create


def _binds(table: Any, prefix: str, columns: tuple[str, ...]) -> list[Any]:
    return [bindparam(f"{prefix}{c}", type_=table.c[c].type) for c in columns]


@functools.cache
def create_snapshot() -> Select[Any]:
    """What a create reads first, in one statement: the assistant (the tenant's own or a
    shared one) and, when it exists, the thread's status, metadata, interrupts (for a strict
    resume) and state time.

    Bound: assistant_id, tenant_id, thread_id."""
    tenant = bindparam("tenant_id", type_=threads.c.tenant_id.type)
    found = and_(
        threads.c.thread_id == bindparam("thread_id", type_=threads.c.thread_id.type),
        threads.c.tenant_id == tenant,
    )
    return (
        select(
            assistants,
            threads.c.status.label("thread_status"),
            threads.c.metadata.label("thread_metadata"),
            threads.c.interrupts.label("thread_interrupts"),
            threads.c.state_updated_at.label("thread_state_at"),
        )
        .select_from(assistants.outerjoin(threads, found))
        .where(
            assistants.c.assistant_id == bindparam("assistant_id"),
            # the tenant's own and the shared system assistants (assistants.queries.visible_to)
            or_(assistants.c.tenant_id == tenant, assistants.c.tenant_id == SYSTEM_TENANT),
        )
    )


def _idle_thread() -> Select[Any]:
    """The thread, locked, while it is as the create read it: not busy, no run in flight
    (idle may be stale, see `RunService`), the same metadata and state (a strict resume was
    judged against that state)."""
    t_id = bindparam("r_thread_id", type_=threads.c.thread_id.type)
    t_tenant = bindparam("r_tenant_id", type_=threads.c.tenant_id.type)
    return (
        select(threads.c.thread_id, threads.c.tenant_id)
        .where(
            threads.c.thread_id == t_id,
            threads.c.tenant_id == t_tenant,
            threads.c.status != ThreadStatus.BUSY.value,
            threads.c.metadata == bindparam("seen_metadata", type_=threads.c.metadata.type),
            threads.c.state_updated_at
            == bindparam("seen_state_at", type_=threads.c.state_updated_at.type),
            ~active_runs_on(threads.c.thread_id, threads.c.tenant_id),
        )
        .with_for_update()
    )


def _wake() -> ColumnElement[Any]:
    """pg_notify(:channel, :payload) as text (a void result cannot be returned)."""
    return cast(
        func.pg_notify(bindparam("channel", type_=Text), bindparam("payload", type_=Text)), Text
    ).label("notified")


def _mark_busy(thread_id: Any, tenant_id: Any) -> Update:
    return (
        threads.update()
        .where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
        .values(
            status=ThreadStatus.BUSY.value,
            metadata=bindparam("t_metadata", type_=threads.c.metadata.type),
            config=bindparam("t_config", type_=threads.c.config.type),
            updated_at=bindparam("t_updated_at", type_=threads.c.updated_at.type),
        )
    )


@functools.cache
def quick_create(
    dialect_name: str, *, new_thread: bool, notify: bool
) -> tuple[tuple[Any, ...], int]:
    """The writes of a run on a new thread (stateless, if_not_exists=create) or on an idle
    one, without a strategy to apply: `(statements, index of the one returning the run)`.

    Run in order in one transaction; a statement returning no row stops it with nothing
    written (new thread: the id is taken; idle thread: busy or changed since the snapshot).
    Where the dialect runs DML in CTEs (`single_statement_autocommit`: PostgreSQL) they are
    chained into one, sent autocommitted in one round trip; otherwise (SQLite) they are two
    in its write transaction, which costs no round trips. `notify` (PostgreSQL only): the
    statement also sends the NOTIFY that wakes idle workers, delivered on commit."""
    chained = single_statement_autocommit(dialect_name)
    run_values = select(*_binds(runs, "r_", RUN_COLUMNS))
    if new_thread:
        thread = (
            insert_for(dialect_name, threads)
            .values(dict(zip(THREAD_COLUMNS, _binds(threads, "t_", THREAD_COLUMNS), strict=True)))
            .on_conflict_do_nothing(index_elements=["thread_id"])
            .returning(threads.c.thread_id)
        )
        if not chained:
            run = runs.insert().from_select(list(RUN_COLUMNS), run_values).returning(*runs.c)
            return (thread, run), 1
        new = thread.cte("new_thread")
        run_cte = (
            runs.insert()
            .from_select(list(RUN_COLUMNS), run_values.select_from(new))
            .returning(*runs.c)
            .cte("new_run")
        )
        return (select(*run_cte.c, *([_wake()] if notify else [])),), 0
    idle = _idle_thread()
    if not chained:
        run = (
            runs.insert()
            .from_select(list(RUN_COLUMNS), run_values.where(exists(idle.subquery())))
            .returning(*runs.c)
        )
        busy = _mark_busy(bindparam("r_thread_id"), bindparam("r_tenant_id")).returning(
            threads.c.thread_id
        )
        return (run, busy), 0
    idle_cte = idle.cte("idle_thread")
    run_cte = (
        runs.insert()
        .from_select(list(RUN_COLUMNS), run_values.select_from(idle_cte))
        .returning(*runs.c)
        .cte("new_run")
    )
    busy_cte = _mark_busy(run_cte.c.thread_id, run_cte.c.tenant_id).cte("busy_thread")
    return (select(*run_cte.c, *([_wake()] if notify else [])).add_cte(busy_cte),), 0


def insert_run(row: dict[str, Any]) -> Any:
    return runs.insert().values(**row).returning(runs)


def lock_thread(tenant_id: str, thread_id: str) -> Select[Any]:
    """The thread row, locked against concurrent run creation (PostgreSQL row lock; SQLite
    transactions already hold the single write lock)."""
    return (
        select(threads)
        .where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
        .with_for_update()
    )


# --------------------------------------------------------------------------- read


# Built once, values bound: a statement built per call (literal values) costs its
# construction and a fresh cache key on every run read, about half its CPU.
RUN_ROW = select(runs).where(
    runs.c.run_id == bindparam("run_id"), runs.c.tenant_id == bindparam("tenant_id")
)
RUN_ROW_IN_THREAD = RUN_ROW.where(runs.c.thread_id == bindparam("thread_id"))


def run_row(
    tenant_id: str, run_id: str, thread_id: str | None = None
) -> tuple[Select[Any], dict[str, str]]:
    """The run row statement (in `thread_id` when given) and its parameters."""
    params = {"tenant_id": tenant_id, "run_id": run_id}
    if thread_id is None:
        return RUN_ROW, params
    return RUN_ROW_IN_THREAD, {**params, "thread_id": thread_id}


def thread_exists(tenant_id: str, thread_id: str) -> Select[Any]:
    return select(threads.c.thread_id).where(
        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
    )


def thread_runs(
    tenant_id: str, thread_id: str, *, status: str | None, limit: int, offset: int
) -> Select[Any]:
    """A thread's runs, newest first."""
    stmt = select(runs).where(runs.c.thread_id == thread_id, runs.c.tenant_id == tenant_id)
    if status:
        stmt = stmt.where(runs.c.status == status)
    return stmt.order_by(runs.c.created_at.desc(), runs.c.run_id.desc()).limit(limit).offset(offset)


def inflight_runs(tenant_id: str, thread_id: str) -> Select[Any]:
    return select(runs).where(
        runs.c.thread_id == thread_id,
        runs.c.tenant_id == tenant_id,
        runs.c.status.in_(_ACTIVE),
    )


def runs_to_cancel(
    tenant_id: str, *, run_ids: list[str] | None, thread_id: str | None, status: str | None
) -> Select[Any]:
    """Active runs by ids (on one thread, if given) or by status (None / `all`: both active
    ones), locked for the cancel."""
    stmt = select(runs).where(runs.c.tenant_id == tenant_id)
    if run_ids is not None:
        stmt = stmt.where(runs.c.run_id.in_(run_ids), runs.c.status.in_(_ACTIVE))
        if thread_id is not None:
            stmt = stmt.where(runs.c.thread_id == thread_id)
    else:
        wanted = _ACTIVE if status in (None, "all") else [status]
        stmt = stmt.where(runs.c.status.in_(wanted))
    return stmt.with_for_update()


def thread_outcome(tenant_id: str, thread_id: str) -> Select[Any]:
    """A thread's cached values, status, error and interrupts (a finished run's output)."""
    return select(
        threads.c["values"].label("state"),
        threads.c.status,
        threads.c.error,
        threads.c.interrupts,
    ).where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)


def owned_run(token: FencingToken) -> Select[Any]:
    """The run while `token`'s attempt still owns it."""
    return select(runs.c.run_id).where(owns_run(token))


def delete_owned_run(token: FencingToken, tenant_id: str) -> Delete:
    """A cancel with rollback ends the run by deleting it, while the attempt owns it."""
    return delete(runs).where(owns_run(token), runs.c.tenant_id == tenant_id)


def current_attempt(run_id: str) -> Select[Any]:
    return select(runs.c.attempt, runs.c.status).where(runs.c.run_id == run_id)


def history_length(tenant_id: str, thread_id: str, cap: int) -> Select[Any]:
    """The thread's root checkpoints, counted up to `cap` (an index-only count)."""
    capped = (
        select(checkpoints.c.checkpoint_id)
        .where(
            checkpoints.c.tenant_id == tenant_id,
            checkpoints.c.thread_id == thread_id,
            checkpoints.c.checkpoint_ns == "",
        )
        .limit(cap)
        .subquery()
    )
    return select(func.count()).select_from(capped)


# --------------------------------------------------------------------------- cancel / delete


def ask_to_stop(tenant_id: str, run_id: str, *, action: str, reason: str, now: datetime) -> Update:
    """A running run: record the cancel; its worker sees it and stops."""
    return (
        runs.update()
        .where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
        .values(cancel_action=action, cancel_reason=reason, updated_at=now)
    )


def interrupt_pending(
    tenant_id: str, run_id: str, *, action: str, reason: str, now: datetime
) -> Update:
    """A pending run nobody executes ends here: interrupted."""
    return (
        runs.update()
        .where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
        .values(
            status=RunStatus.INTERRUPTED.value,
            cancel_action=action,
            cancel_reason=reason,
            ended_at=now,
            updated_at=now,
        )
    )


def delete_run(tenant_id: str, run_id: str) -> Delete:
    return delete(runs).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)


def thread_error_and_interrupts(tenant_id: str, thread_id: str) -> Select[Any]:
    return select(threads.c.interrupts, threads.c.error).where(
        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
    )


# --------------------------------------------------------------------------- NOTIFY


@functools.cache
def notify(dialect_name: str) -> TextClause | None:
    """The statement sending one NOTIFY (bound: channel, payload; app/runs/notify.py), or
    None where the dialect has none (SQLite: one process wakes its readers directly)."""
    sql = notify_channel_sql(dialect_name)
    return None if sql is None else text(sql)


# --------------------------------------------------------------------------- webhooks


def thread_values(tenant_id: str, thread_id: str) -> Select[Any]:
    """A thread's cached values (a finished run's webhook reports them)."""
    return select(threads.c["values"]).where(
        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
    )


def forget_webhook_delivery(tenant_id: str, run_id: str) -> Delete:
    """The recorded delivery of a run's webhook (a later attempt's record replaces it)."""
    return delete(webhook_deliveries).where(
        webhook_deliveries.c.run_id == run_id, webhook_deliveries.c.tenant_id == tenant_id
    )


def insert_webhook_delivery(tenant_id: str, run_id: str, **values: Any) -> Insert:
    """The outcome of a run's webhook (`values`: the other columns of `webhook_deliveries`)."""
    return insert(webhook_deliveries).values(run_id=run_id, tenant_id=tenant_id, **values)

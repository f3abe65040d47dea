"""The statements that end a run (app/runs/finish.py): its fenced final status, and on
PostgreSQL the whole end in ONE statement of data-modifying CTEs: the final status, the event
rows, the expiry of the earlier ones, the thread's state with the busy rule
(app/threads/run_status.py) and the NOTIFYs. Pure builders, as app/runs/queries.py."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    DateTime,
    Select,
    String,
    Text,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    null,
    select,
)
from sqlalchemy.sql.dml import Insert, Update

from app.db.dialect import unnest_arrays
from app.db.tables import (
    checkpoint_blobs,
    checkpoint_writes,
    checkpoints,
    run_events,
    runs,
    thread_events,
    threads,
)
from app.runs.queue_queries import FENCE_ATTEMPT, FENCE_RUN_ID, owns_run_bound
from app.statuses import ThreadStatus
from app.threads.run_status import thread_status_after


def end_run(
    owned: ColumnElement[bool],
    *,
    tenant_id: Any,
    status: Any,
    error: Any,
    now: Any,
) -> Update:
    """The run's final status, fenced by `owned` (the attempt still owns it)."""
    return (
        runs.update()
        .where(owned, runs.c.tenant_id == tenant_id)
        .values(
            status=status,
            error=error,
            ended_at=now,
            updated_at=now,
            worker_id=None,
            lease_expires_at=None,
        )
    )


@functools.cache
def insert_events() -> Insert:
    """Event rows, one per parameter set (`finish.give_up`: its `error` event and the
    `__end__` marker, in the transaction whose fenced `end_run` went through)."""
    return insert(run_events)


def _end_binds() -> dict[str, Any]:
    return {
        "run_id": bindparam(FENCE_RUN_ID, type_=runs.c.run_id.type),
        "tenant_id": bindparam("e_tenant_id", type_=runs.c.tenant_id.type),
        "thread_id": bindparam("e_thread_id", type_=runs.c.thread_id.type),
        "expires_at": bindparam("e_expires_at", type_=DateTime(timezone=True)),
    }


def _events_ctes(b: dict[str, Any], owner: Any) -> list[Any]:
    """Insert the event rows (parallel arrays `e_seq`, `e_event`, `e_data`, `e_created_at`:
    one statement shape for any number) and expire the ones stored earlier."""
    mine = exists(select(literal(1)).select_from(owner))
    rows = unnest_arrays(
        "postgresql",
        "e_",
        {
            "seq": BigInteger(),
            "event": Text(),
            "data": run_events.c.data.type,  # sealed
            "created_at": DateTime(timezone=True),
        },
    )
    ev = (
        run_events.insert()
        .from_select(
            ["run_id", "seq", "thread_id", "tenant_id", "event", "data", "created_at"]
            + ["expires_at"],
            select(
                b["run_id"],
                rows.c.seq,
                b["thread_id"],
                b["tenant_id"],
                rows.c.event,
                rows.c.data,
                rows.c.created_at,
                b["expires_at"],
            ).where(mine),
        )
        .cte("ev")
    )
    x = (
        run_events.update()
        .where(
            bindparam("e_wrote_any", type_=Boolean),
            run_events.c.run_id == b["run_id"],
            run_events.c.tenant_id == b["tenant_id"],
            run_events.c.expires_at.is_(None),
            mine,
        )
        .values(expires_at=b["expires_at"])
        .cte("x")
    )
    return [ev, x]


def _announce(source: Any, payload: str) -> Any:
    """pg_notify(:e_channel, :<payload>) once per row of `source`, only with `:e_announce`
    (another process listens: app/runs/peers.py). A notifying commit holds PostgreSQL's
    cluster-wide NOTIFY lock through its WAL flush, so a lone process sends none."""
    return cast(
        select(func.pg_notify(bindparam("e_channel", type_=Text), bindparam(payload, type_=Text)))
        .select_from(source)
        .where(bindparam("e_announce", type_=Boolean))
        .scalar_subquery(),
        Text,
    )


@functools.cache
def settle_in_one() -> Select[Any]:
    """PostgreSQL: a run's end in ONE statement (app/runs/finish.py). `r` ends the run while
    this attempt owns it (the row lock makes a concurrent reaper or claim wait, or this see
    their change and do nothing); everything else is conditional on `r`, so a superseded
    attempt's settle changes nothing and says so (`owned` 0). The thread update reads `r`,
    so the row locks are taken run then thread, the order a cancel takes them."""
    b = _end_binds()
    now = bindparam("e_now", type_=DateTime(timezone=True))
    r = (
        end_run(
            owns_run_bound(),
            tenant_id=b["tenant_id"],
            status=bindparam("e_status", type_=Text),
            error=bindparam("e_run_error", type_=runs.c.error.type),
            now=now,
        )
        .returning(runs.c.run_id)
        .cte("r")
    )
    mine = exists(select(literal(1)).select_from(r))
    status = thread_status_after(
        b["thread_id"],
        b["tenant_id"],
        bindparam("e_thread_status", type_=Text),
        other_than=b["run_id"],  # still `running` in this statement's snapshot
    )
    t = (
        threads.update()
        .where(threads.c.thread_id == b["thread_id"], threads.c.tenant_id == b["tenant_id"], mine)
        .values(
            {
                "status": status,
                "values": bindparam("e_values", type_=threads.c["values"].type),
                "interrupts": bindparam("e_interrupts", type_=threads.c.interrupts.type),
                "error": bindparam("e_error", type_=threads.c.error.type),
                "updated_at": now,
                "state_updated_at": now,
            }
        )
        .returning(threads.c.status)
        .cte("t")
    )
    busy = select(t.c.status).where(t.c.status == ThreadStatus.BUSY.value).subquery()
    return select(
        select(func.count()).select_from(r).scalar_subquery().label("owned"),
        select(t.c.status).scalar_subquery().label("thread_status"),
        _announce(r, "e_payload").label("e"),
        _announce(busy, "q_payload").label("q"),
    ).add_cte(*_events_ctes(b, r), _terminal_cte(b, r, t, now))


def _terminal_cte(b: dict[str, Any], r: Any, t: Any, now: Any) -> Any:
    """The thread stream's root terminal lifecycle row (when `l_log`), in the settle itself
    instead of a transaction of its own after it: written only with `r` (the attempt that
    settled the run, the fence the separate append checked), atomically with the run's end.
    Its data is `l_data`, or `l_data_interrupted` when the thread ends up `interrupted` (the
    status this statement writes). Its seq is the thread's `max(seq) + 1` read in this
    statement, as every append's (a racing writer collides on the key; the settle retries)."""
    te = thread_events
    seq = (
        select(func.coalesce(func.max(te.c.seq), 0) + literal(1, BigInteger))
        .where(te.c.tenant_id == b["tenant_id"], te.c.thread_id == b["thread_id"])
        .scalar_subquery()
    )
    interrupted = exists(
        select(literal(1)).select_from(t).where(t.c.status == ThreadStatus.INTERRUPTED.value)
    )
    data = case(
        (interrupted, bindparam("l_data_interrupted", type_=Text)),
        else_=bindparam("l_data", type_=Text),
    )
    source = select(
        b["thread_id"],
        seq,
        b["tenant_id"],
        cast(seq, String),
        b["run_id"],
        bindparam(FENCE_ATTEMPT, type_=runs.c.attempt.type),
        literal("lifecycle", String),
        literal("[]", String),
        data,
        now,
    ).where(bindparam("l_log", type_=Boolean), exists(select(literal(1)).select_from(r)))
    columns = ["thread_id", "seq", "tenant_id", "event_id", "run_id", "attempt", "method"]
    return te.insert().from_select(columns + ["namespace", "data", "created_at"], source).cte("l")


@functools.cache
def delete_temporary_in_one() -> Select[Any]:
    """PostgreSQL: a stateless run's end that deletes its temporary thread, checkpoints and
    (foreign key cascade) the run, its events stored, in ONE statement; fenced as the
    settle (`r` is the owning run row, locked; nothing happens without it)."""
    b = _end_binds()
    r = (
        select(runs.c.run_id)
        .where(owns_run_bound(), runs.c.tenant_id == b["tenant_id"])
        .with_for_update()
        .cte("r")
    )
    mine = exists(select(literal(1)).select_from(r))
    gone = [
        delete(table)
        .where(table.c.tenant_id == b["tenant_id"], table.c.thread_id == b["thread_id"], mine)
        .cte(name)
        for table, name in (
            (checkpoints, "dc"),
            (checkpoint_blobs, "db"),
            (checkpoint_writes, "dw"),
        )
    ]
    thread = (
        delete(threads)
        .where(threads.c.thread_id == b["thread_id"], threads.c.tenant_id == b["tenant_id"], mine)
        .cte("dt")
    )
    return select(
        select(func.count()).select_from(r).scalar_subquery().label("owned"),
        cast(null(), Text).label("thread_status"),
        _announce(r, "e_payload").label("e"),
        cast(null(), Text).label("q"),
    ).add_cte(*_events_ctes(b, r), *gone, thread)

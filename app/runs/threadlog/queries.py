"""SQL of the per-thread event log (`thread_events`).

Appends are fenced: each row is `INSERT ... SELECT ... WHERE <fence>`, so a run attempt that
no longer owns its run inserts nothing in the very statement that would have written. The
seq of a batch is the thread's `max(seq)` read in the same statement plus the row's
position; two writers racing for the same seq collide on the primary key and the loser
retries (app/runs/threadlog/log.py), so a committed seq is never below an uncommitted one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Delete,
    Insert,
    Integer,
    Select,
    String,
    Text,
    Update,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    insert,
    select,
    type_coerce,
    update,
)

from app.db.dialect import bound_rows, bound_rows_params, one_of
from app.db.tables import runs, thread_events, threads
from app.runs.fencing import (
    FENCE_ATTEMPT,
    FENCE_RUN_ID,
    FencingToken,
    fence_params,
    owns_run_bound,
)
from app.statuses import ACTIVE_RUN_STATUSES, FINAL_RUN_STATUSES

TE = thread_events
# statuses after which a run's attempt may still append its root terminal lifecycle
SETTLED_STATUSES = tuple(sorted(status.value for status in FINAL_RUN_STATUSES))

_COLUMNS = (
    "thread_id",
    "seq",
    "tenant_id",
    "event_id",
    "run_id",
    "attempt",
    "method",
    "namespace",
    "data",
    "created_at",
)


# The append's bound parameters besides the token's (FENCE_RUN_ID, FENCE_ATTEMPT) and the
# rows' (`bound_rows` with prefix "a_": offset n, method, namespace, data).
A_TENANT_ID = "a_tenant_id"
A_THREAD_ID = "a_thread_id"
A_NOW = "a_now"
A_CHANNEL = "a_channel"
A_PAYLOAD = "a_payload"
ROW_COLUMNS = ["n", "method", "namespace", "data"]


def settled_by_bound() -> ColumnElement[bool]:
    """`EXISTS`: the token's attempt is the one that settled the run (its terminal may follow)."""
    return exists(
        select(runs.c.run_id).where(
            runs.c.run_id == bindparam(FENCE_RUN_ID, type_=runs.c.run_id.type),
            runs.c.attempt == bindparam(FENCE_ATTEMPT, type_=runs.c.attempt.type),
            one_of(runs.c.status, SETTLED_STATUSES),
        )
    )


def owns_run_bound_exists() -> ColumnElement[bool]:
    """`EXISTS`: the token's attempt still owns its run (bound, as `owns_run_bound`)."""
    return exists(select(runs.c.run_id).where(owns_run_bound()))


@functools.cache
def append_events(dialect: str, *, settled: bool = False) -> Insert:
    """Append rows after the thread's last seq (seq = last + the row's offset `n`), only
    while the token's attempt owns its run (or, `settled`, is the attempt that settled it).

    One statement shape for any number of rows, built once per dialect: a UNION ALL of one
    SELECT per row (as this was) cost SQLAlchemy a new statement, cache key and compile per
    batch, most of an append's time (10 ms per event under 10,000 streamed messages)."""
    fence = settled_by_bound() if settled else owns_run_bound_exists()
    tenant_id = bindparam(A_TENANT_ID, type_=TE.c.tenant_id.type)
    thread_id = bindparam(A_THREAD_ID, type_=TE.c.thread_id.type)
    base = (
        select(func.coalesce(func.max(TE.c.seq), 0))
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id)
        .scalar_subquery()
    )
    rows = bound_rows(
        dialect,
        "a_",
        {"n": BigInteger(), "method": Text(), "namespace": Text(), "data": Text()},
    )
    seq = base + rows.c.n
    source = select(
        thread_id,
        seq,
        tenant_id,
        cast(seq, String),
        bindparam(FENCE_RUN_ID, type_=String),
        bindparam(FENCE_ATTEMPT, type_=Integer),
        rows.c.method,
        rows.c.namespace,
        rows.c.data,
        bindparam(A_NOW, type_=TE.c.created_at.type),
    ).where(fence)
    # the seqs written: the appender hands the committed events to this process's followers
    return insert(TE).from_select(list(_COLUMNS), source).returning(TE.c.seq)


def append_params(
    dialect: str,
    *,
    tenant_id: str,
    thread_id: str,
    token: FencingToken,
    rows: Sequence[tuple[str, str, str]],
    now: datetime,
) -> dict[str, Any]:
    """The parameters of `append_events` (and `append_announced`) for `(method,
    namespace_json, data)` rows."""
    numbered = [(n, method, ns, data) for n, (method, ns, data) in enumerate(rows, start=1)]
    return {
        A_TENANT_ID: tenant_id,
        A_THREAD_ID: thread_id,
        A_NOW: now,
        **fence_params(token),
        **bound_rows_params(dialect, "a_", ROW_COLUMNS, numbered),
    }


def read_after(*, tenant_id: str, thread_id: str, since: int, limit: int) -> Select[Any]:
    """The caller's events of the thread with `seq > since`, oldest first. `created_at` is
    read raw (no result processing: asyncpg's datetime, SQLite's stored text), not through
    UTCDateTime's per-row processing: a replay reads thousands of rows, and the reader
    converts each distinct value once (`app.db.types.utc_from_raw`)."""
    created_at = type_coerce(TE.c.created_at, String).label("created_at")
    return (
        select(TE.c.seq, TE.c.event_id, TE.c.method, TE.c.namespace, TE.c.data, created_at)
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id, TE.c.seq > since)
        .order_by(TE.c.seq)
        .limit(limit)
    )


def last_seq(*, tenant_id: str, thread_id: str) -> Select[Any]:
    return select(func.max(TE.c.seq)).where(
        TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id
    )


def last_seqs(*, tenant_id: str, thread_ids: Sequence[str]) -> Select[Any]:
    """`(thread_id, last)` of those of the caller's threads that have events."""
    return (
        select(TE.c.thread_id, func.max(TE.c.seq).label("last"))
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id.in_(thread_ids))
        .group_by(TE.c.thread_id)
    )


def delete_for_threads(*, tenant_id: str, thread_ids: Sequence[str]) -> Delete:
    """The log goes with its threads (delete, prune, TTL)."""
    return delete(TE).where(TE.c.tenant_id == tenant_id, TE.c.thread_id.in_(list(thread_ids)))


def delete_for_run(*, tenant_id: str, run_id: str) -> Delete:
    """A rolled-back run's events go with the run."""
    return delete(TE).where(and_(TE.c.tenant_id == tenant_id, TE.c.run_id == run_id))


def run_has_events(*, tenant_id: str, run_id: str) -> Select[Any]:
    """Did an earlier attempt of the run log anything (its root `running` is there)?"""
    return select(TE.c.seq).where(TE.c.tenant_id == tenant_id, TE.c.run_id == run_id).limit(1)


def thread_status(*, tenant_id: str, thread_id: str) -> Select[Any]:
    return select(threads.c.status).where(
        threads.c.tenant_id == tenant_id, threads.c.thread_id == thread_id
    )


# --------------------------------------------------------------------------- retention

# The row left where the log was trimmed: the oldest row of a trimmed thread, at the seq of the
# last event removed. A reader whose cursor is below it missed events (the protocol's
# `resume_gap`); one at or above it missed nothing. Never delivered.
TRIMMED = "log.trimmed"


def last_event_run(*, tenant_id: str, thread_id: str) -> Select[Any]:
    """The run of the thread's newest event (its events are never trimmed: they hold the
    thread's max seq, which the next append counts from)."""
    return (
        select(TE.c.run_id)
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id)
        .order_by(TE.c.seq.desc())
        .limit(1)
    )


def first_kept_seq(
    *, tenant_id: str, thread_id: str, keep_run: str | None, older_than: datetime | None
) -> Select[Any]:
    """The lowest seq that must stay: the newest event's run, runs still pending or running
    (a client may be mid-replay of them), and with `older_than` every event not older."""
    live_runs = select(runs.c.run_id).where(
        runs.c.tenant_id == tenant_id,
        runs.c.thread_id == thread_id,
        runs.c.status.in_(sorted(ACTIVE_RUN_STATUSES)),
    )
    kept: ColumnElement[bool] = TE.c.run_id.in_(live_runs)
    if keep_run is not None:
        kept = kept | (TE.c.run_id == keep_run)
    if older_than is not None:
        kept = kept | (TE.c.created_at >= older_than)
    return select(func.min(TE.c.seq)).where(
        TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id, TE.c.method != TRIMMED, kept
    )


def trim_point(*, tenant_id: str, thread_id: str, below: int) -> Select[Any]:
    """The newest seq under `below` and its method (the would-be tombstone)."""
    return (
        select(TE.c.seq, TE.c.method)
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id, TE.c.seq < below)
        .order_by(TE.c.seq.desc())
        .limit(1)
    )


def delete_below(*, tenant_id: str, thread_id: str, seq: int) -> Delete:
    return delete(TE).where(
        TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id, TE.c.seq < seq
    )


def mark_trimmed(*, tenant_id: str, thread_id: str, seq: int, data: str) -> Update:
    """Turn the row at `seq` into the tombstone (no run: a rolled-back run's delete keeps it)."""
    return (
        update(TE)
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id, TE.c.seq == seq)
        .values(method=TRIMMED, run_id=None, namespace="[]", data=data)
    )


def oldest_row(*, tenant_id: str, thread_id: str) -> Select[Any]:
    """The thread's oldest row (the tombstone when the log was trimmed)."""
    return (
        select(TE.c.seq, TE.c.method)
        .where(TE.c.tenant_id == tenant_id, TE.c.thread_id == thread_id)
        .order_by(TE.c.seq)
        .limit(1)
    )


def threads_with_events_before(
    *, cutoff: datetime, after: tuple[str, str] | None, limit: int
) -> Select[Any]:
    """(tenant_id, thread_id) of threads holding events older than `cutoff`, in key order
    from `after` (a sweep pages through them)."""
    stmt = (
        select(TE.c.tenant_id, TE.c.thread_id)
        .where(TE.c.created_at < cutoff, TE.c.method != TRIMMED)
        .group_by(TE.c.tenant_id, TE.c.thread_id)
        .order_by(TE.c.tenant_id, TE.c.thread_id)
        .limit(limit)
    )
    if after is not None:
        stmt = stmt.where(
            (TE.c.tenant_id > after[0])
            | ((TE.c.tenant_id == after[0]) & (TE.c.thread_id > after[1]))
        )
    return stmt


@functools.cache
def append_announced(*, settled: bool = False) -> Select[Any]:
    """PostgreSQL: `append_events` and the NOTIFY of `:a_payload` on `:a_channel` when it
    wrote, in ONE statement (autocommitted: no BEGIN / COMMIT round trips); `written` is its
    row count, `last` the last seq written."""
    written = append_events("postgresql", settled=settled).cte("written")
    announce = select(
        func.pg_notify(bindparam(A_CHANNEL, type_=Text), bindparam(A_PAYLOAD, type_=Text))
    )
    return select(
        select(func.count()).select_from(written).scalar_subquery().label("written"),
        select(func.max(written.c.seq)).scalar_subquery().label("last"),
        cast(announce.where(exists(select(written.c.seq))).scalar_subquery(), Text).label("e"),
    )

"""A run's end on PostgreSQL in ONE autocommitted statement.

Ending a run writes its final status, the events not stored yet plus the `__end__` marker, the
expiry of the events stored earlier, the thread's status / values / interrupts and the NOTIFYs
that announce it. As separate statements that is a transaction of BEGIN, six statements and
COMMIT, each a round trip. (The thread's history length, for its metric, is counted after the
answer instead: that count grows with the thread.)
Here data-modifying CTEs do all of it in one statement, atomically (one commit: nothing of it
is visible before the rest), in one round trip.

A stateless run whose temporary thread goes on completion (`on_completion=delete`) deletes
the thread, its checkpoints and (by the foreign key cascade) the run in the same statement,
instead of settling a thread that is deleted right after.

SQLite keeps the statement-by-statement transaction (app/runs/executor.py); there a
transaction costs no round trips.

Both are fenced (app/runs/fencing.py): a superseded attempt's end changes nothing and raises
AttemptSuperseded. `give_up` ends a run whose settle itself keeps failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Text, bindparam, insert, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import BindParameter

from app import metrics
from app.db.tables import run_events, runs, threads
from app.db.types import utcnow
from app.graphs.jsonable import dumps
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken, owns_run
from app.runs.queue import one_statement
from app.threads import run_status

_JSON = threads.c["values"].type
_RUN_ERROR = runs.c.error.type

# The event rows (seq, event, data, created_at) come as parallel arrays, so one statement
# shape serves any number of events (it stays in the prepared-statement caches).
_EVENTS = """
    ev AS (
        INSERT INTO run_events (run_id, seq, thread_id, tenant_id, event, data, created_at,
                                expires_at)
        SELECT :run_id, e.seq, :thread_id, :tenant_id, e.event, e.data, e.created_at,
               :expires_at
        FROM unnest(:seqs, :events, :datas, :created) AS e(seq, event, data, created_at)
        WHERE EXISTS (SELECT 1 FROM r)
    ),
    x AS (
        UPDATE run_events SET expires_at = :expires_at
        WHERE :wrote_any AND run_id = :run_id AND tenant_id = :tenant_id
          AND expires_at IS NULL AND EXISTS (SELECT 1 FROM r)
    )"""

# Fenced (app/runs/fencing.py): `r` ends the run only while this attempt owns it (its
# fencing token, still running; the row lock makes a concurrent reaper or claim wait, or this
# see their change and do nothing), and everything else is conditional on `r`, so a
# superseded attempt's settle changes nothing and says so (`owned` 0). The thread update
# reads `r`, so the row locks are taken run then thread, the order a cancel takes them.
# Another run pending or running on the thread keeps it busy; ours still reads `running` in
# this statement's snapshot, hence `run_id <> :run_id`.
_SETTLE = f"""
WITH r AS (
        UPDATE runs SET status = :status, error = :run_error, ended_at = :now,
            updated_at = :now, worker_id = NULL, lease_expires_at = NULL
        WHERE run_id = :run_id AND tenant_id = :tenant_id AND attempt = :attempt
          AND status = 'running'
        RETURNING run_id
    ),
    t AS (
        UPDATE threads SET
            status = CASE WHEN EXISTS (
                SELECT 1 FROM runs AS o
                WHERE o.thread_id = :thread_id AND o.tenant_id = :tenant_id
                  AND o.status IN ('pending', 'running') AND o.run_id <> :run_id
            ) THEN 'busy' ELSE :thread_status END,
            "values" = :values, interrupts = :interrupts, error = :error,
            updated_at = :now, state_updated_at = :now
        WHERE thread_id = :thread_id AND tenant_id = :tenant_id AND EXISTS (SELECT 1 FROM r)
        RETURNING status
    ),{_EVENTS}
SELECT (SELECT count(*) FROM r) AS owned, (SELECT status FROM t) AS thread_status,
       (SELECT pg_notify(:channel, :e_payload) FROM r)::text AS e,
       (SELECT pg_notify(:channel, :q_payload) FROM t WHERE t.status = 'busy')::text AS q
"""

# Fenced as the settle: `r` is the owning run row, locked; nothing happens without it.
_DELETE_TEMPORARY = f"""
WITH r AS (
        SELECT run_id FROM runs
        WHERE run_id = :run_id AND tenant_id = :tenant_id AND attempt = :attempt
          AND status = 'running'
        FOR UPDATE
    ),{_EVENTS},
    dc AS (DELETE FROM checkpoints WHERE tenant_id = :tenant_id AND thread_id = :thread_id
           AND EXISTS (SELECT 1 FROM r)),
    db AS (DELETE FROM checkpoint_blobs WHERE tenant_id = :tenant_id AND thread_id = :thread_id
           AND EXISTS (SELECT 1 FROM r)),
    dw AS (DELETE FROM checkpoint_writes WHERE tenant_id = :tenant_id AND thread_id = :thread_id
           AND EXISTS (SELECT 1 FROM r)),
    dt AS (DELETE FROM threads WHERE thread_id = :thread_id AND tenant_id = :tenant_id
           AND EXISTS (SELECT 1 FROM r))
SELECT (SELECT count(*) FROM r) AS owned, CAST(NULL AS text) AS thread_status,
       (SELECT pg_notify(:channel, :e_payload) FROM r)::text AS e, CAST(NULL AS text) AS q
"""


def _statement(sql: str, *, settle: bool) -> Any:
    binds: list[BindParameter[Any]] = [
        bindparam("seqs", type_=postgresql.ARRAY(BigInteger)),
        bindparam("events", type_=postgresql.ARRAY(Text)),
        bindparam("datas", type_=postgresql.ARRAY(run_events.c.data.type)),  # sealed
        bindparam("created", type_=postgresql.ARRAY(DateTime(timezone=True))),
        bindparam("expires_at", type_=DateTime(timezone=True)),
    ]
    if settle:
        binds += [
            bindparam("values", type_=_JSON),
            bindparam("interrupts", type_=_JSON),
            bindparam("error", type_=_JSON),
            bindparam("run_error", type_=_RUN_ERROR),
            bindparam("now", type_=DateTime(timezone=True)),
        ]
    return (
        text(sql).bindparams(*binds).columns(owned=BigInteger, thread_status=Text, e=Text, q=Text)
    )


SETTLE = _statement(_SETTLE, settle=True)
DELETE_TEMPORARY = _statement(_DELETE_TEMPORARY, settle=False)


@dataclass(frozen=True)
class Finish:
    """What ending one run writes (see the module docstring)."""

    run_id: str
    attempt: int  # with run_id, the fencing token: the settle applies only while it owns the run
    thread_id: str
    tenant_id: str
    rows: list[dict[str, Any]]  # event rows, `__end__` last (RunPublisher.final_rows)
    wrote_any: bool  # rows were stored before: set their expiry too
    channel: str
    e_payload: str
    q_payload: str


async def settle(
    engine: AsyncEngine,
    finish: Finish,
    *,
    status: str,
    error: dict[str, str] | None,
    thread_status: str,
    values: Any,
    interrupts: dict[str, Any],
    now: datetime,
) -> str | None:
    """Final run status, events and thread state in one statement; the thread's new status
    (None if the thread is gone)."""
    params = {
        **_common(finish),
        "status": status,
        "run_error": error,
        "thread_status": thread_status,
        "values": values,
        "interrupts": interrupts,
        "error": error,
        "now": now,
        "q_payload": finish.q_payload,
    }
    async with one_statement(engine) as conn:
        row = (await conn.execute(SETTLE, params)).one()
    _check_owned(finish, row, "settle")
    return None if row.thread_status is None else str(row.thread_status)


async def delete_temporary(engine: AsyncEngine, finish: Finish) -> None:
    """End a stateless run by deleting its temporary thread, checkpoints and (cascade) the run,
    with its events stored, in one statement."""
    async with one_statement(engine) as conn:
        row = (await conn.execute(DELETE_TEMPORARY, _common(finish))).one()
    _check_owned(finish, row, "settle")


def _check_owned(finish: Finish, row: Any, what: str) -> None:
    if not row.owned:
        metrics.count_fenced_refusal(what)
        raise AttemptSuperseded(FencingToken(finish.run_id, finish.attempt), what)


def _common(finish: Finish) -> dict[str, Any]:
    rows = finish.rows
    return {
        "run_id": finish.run_id,
        "attempt": finish.attempt,
        "thread_id": finish.thread_id,
        "tenant_id": finish.tenant_id,
        "seqs": [r["seq"] for r in rows],
        "events": [r["event"] for r in rows],
        "datas": [r["data"] for r in rows],
        "created": [r["created_at"] for r in rows],
        "expires_at": rows[-1]["expires_at"],
        "wrote_any": finish.wrote_any,
        "channel": finish.channel,
        "e_payload": finish.e_payload,
    }


async def give_up(
    engine: AsyncEngine,
    hub: EventHub,
    *,
    token: FencingToken,
    thread_id: str,
    tenant_id: str,
    error: dict[str, str],
    after_seq: int,
) -> tuple[str | None, int]:
    """End a run `error` without reading its thread's state (that read, or the full settle,
    is what failed): the run's final status, an `error` event and the `__end__` marker, the
    thread released (status error, its cached values kept; busy if other runs wait). Fenced
    like the settle; both dialects, one transaction. Returns the thread's new status and the
    seq of the `error` event."""
    now = utcnow()
    async with engine.begin() as conn:
        ended = await conn.execute(
            runs.update()
            .where(owns_run(token), runs.c.tenant_id == tenant_id)
            .values(
                status="error",
                error=error,
                ended_at=now,
                updated_at=now,
                worker_id=None,
                lease_expires_at=None,
            )
        )
        if not ended.rowcount:
            metrics.count_fenced_refusal("settle")
            raise AttemptSuperseded(token, "settle")
        stored = await hub.last_seq(token.run_id, tenant_id=tenant_id, conn=conn)
        seq = max(after_seq, stored) + 1
        end = hub.end_row(
            run_id=token.run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq + 1
        )
        failed = {**end, "seq": seq, "event": "error", "data": dumps(error)}
        await conn.execute(insert(run_events), [failed, end])
        await hub.set_expiry(conn, run_id=token.run_id, tenant_id=tenant_id)
        settled = await run_status.settle_thread(
            conn, tenant_id=tenant_id, thread_id=thread_id, status="error", error=error
        )
        await hub.notify(conn, "e", token.run_id, thread_id=thread_id)
        if settled == "busy":
            await hub.notify(conn, "q")
    return settled, seq

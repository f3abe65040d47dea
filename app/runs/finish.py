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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Text, bindparam, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import BindParameter

from app.db.tables import run_events, runs, threads
from app.runs.queue import one_statement

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
    ),
    x AS (
        UPDATE run_events SET expires_at = :expires_at
        WHERE :wrote_any AND run_id = :run_id AND tenant_id = :tenant_id
          AND expires_at IS NULL
    )"""

# The thread is updated first (CTEs that the final SELECT reads run before the others), so
# the row locks are taken thread then run, the order run creation takes them. Another run
# pending or running on the thread keeps it busy; ours still reads `running` in this
# statement's snapshot, hence `run_id <> :run_id`.
_SETTLE = f"""
WITH t AS (
        UPDATE threads SET
            status = CASE WHEN EXISTS (
                SELECT 1 FROM runs AS o
                WHERE o.thread_id = :thread_id AND o.tenant_id = :tenant_id
                  AND o.status IN ('pending', 'running') AND o.run_id <> :run_id
            ) THEN 'busy' ELSE :thread_status END,
            "values" = :values, interrupts = :interrupts, error = :error,
            updated_at = :now, state_updated_at = :now
        WHERE thread_id = :thread_id AND tenant_id = :tenant_id
        RETURNING status
    ),
    r AS (
        UPDATE runs SET status = :status, error = :run_error, ended_at = :now,
            updated_at = :now, worker_id = NULL, lease_expires_at = NULL
        WHERE run_id = :run_id AND tenant_id = :tenant_id
    ),{_EVENTS}
SELECT (SELECT status FROM t) AS thread_status,
       pg_notify(:channel, :e_payload)::text AS e,
       (SELECT pg_notify(:channel, :q_payload) FROM t WHERE t.status = 'busy')::text AS q
"""

_DELETE_TEMPORARY = f"""
WITH {_EVENTS.strip()},
    dc AS (DELETE FROM checkpoints WHERE tenant_id = :tenant_id AND thread_id = :thread_id),
    db AS (DELETE FROM checkpoint_blobs WHERE tenant_id = :tenant_id AND thread_id = :thread_id),
    dw AS (DELETE FROM checkpoint_writes WHERE tenant_id = :tenant_id AND thread_id = :thread_id),
    dt AS (DELETE FROM threads WHERE thread_id = :thread_id AND tenant_id = :tenant_id)
SELECT CAST(NULL AS text) AS thread_status, pg_notify(:channel, :e_payload)::text AS e,
       CAST(NULL AS text) AS q
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
    return text(sql).bindparams(*binds).columns(thread_status=Text, e=Text, q=Text)


SETTLE = _statement(_SETTLE, settle=True)
DELETE_TEMPORARY = _statement(_DELETE_TEMPORARY, settle=False)


@dataclass(frozen=True)
class Finish:
    """What ending one run writes (see the module docstring)."""

    run_id: str
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
    return None if row.thread_status is None else str(row.thread_status)


async def delete_temporary(engine: AsyncEngine, finish: Finish) -> None:
    """End a stateless run by deleting its temporary thread, checkpoints and (cascade) the run,
    with its events stored, in one statement."""
    async with one_statement(engine) as conn:
        (await conn.execute(DELETE_TEMPORARY, _common(finish))).one()


def _common(finish: Finish) -> dict[str, Any]:
    rows = finish.rows
    return {
        "run_id": finish.run_id,
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

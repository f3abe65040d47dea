"""A run's end on PostgreSQL in ONE autocommitted statement (built in app/runs/queries.py).

Ending a run writes its final status, the events not stored yet plus the `__end__` marker, the
expiry of the events stored earlier, the thread's status / values / interrupts, the thread
stream's root terminal lifecycle row and the NOTIFYs that announce it. As separate statements
that is a transaction of BEGIN, seven statements and COMMIT, each a round trip. (The thread's
history length, for its metric, is counted after the answer instead: that count grows with
the thread.)
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

from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.access import transaction
from app.db.types import utcnow
from app.graphs.jsonable import dumps
from app.runs import finish_queries
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken, fence_params, owns_run
from app.runs.notify import NOTIFY_CHANNEL
from app.statuses import RunStatus, ThreadStatus
from app.threads import run_status


@dataclass(frozen=True)
class Finish:
    """What ending one run writes (see the module docstring)."""

    run_id: str
    attempt: int  # with run_id, the fencing token: the settle applies only while it owns the run
    thread_id: str
    tenant_id: str
    rows: list[dict[str, Any]]  # event rows, `__end__` last (RunPublisher.final_rows)
    wrote_any: bool  # rows were stored before: set their expiry too
    announce: bool  # NOTIFY the end: another process listens (EventHub.others_listen)
    e_payload: str
    q_payload: str
    # the thread stream's root terminal, stored with the end (`settle` only): its encoded
    # data if the thread ends other than `interrupted`, and if it ends `interrupted`
    terminal: tuple[str, str] | None = None


async def settle(
    engine: AsyncEngine,
    finish: Finish,
    *,
    status: RunStatus,
    error: dict[str, str] | None,
    thread_status: ThreadStatus,
    values: Any,
    interrupts: dict[str, Any],
    now: datetime,
) -> ThreadStatus | None:
    """Final run status, events and thread state in one statement; the thread's new status
    (None if the thread is gone)."""
    params = {
        **_common(finish),
        "e_status": RunStatus(status).value,
        "e_run_error": error,
        "e_thread_status": ThreadStatus(thread_status).value,
        "e_values": values,
        "e_interrupts": interrupts,
        "e_error": error,
        "e_now": now,
        "q_payload": finish.q_payload,
        "l_log": finish.terminal is not None,
        "l_data": finish.terminal[0] if finish.terminal else "",
        "l_data_interrupted": finish.terminal[1] if finish.terminal else "",
    }
    async with transaction(engine, one_statement=True) as conn:
        row = (await conn.execute(finish_queries.settle_in_one(), params)).one()
    _check_owned(finish, row, "settle")
    return None if row.thread_status is None else ThreadStatus(row.thread_status)


async def delete_temporary(engine: AsyncEngine, finish: Finish) -> None:
    """End a stateless run by deleting its temporary thread, checkpoints and (cascade) the run,
    with its events stored, in one statement."""
    async with transaction(engine, one_statement=True) as conn:
        row = (await conn.execute(finish_queries.delete_temporary_in_one(), _common(finish))).one()
    _check_owned(finish, row, "settle")


def _check_owned(finish: Finish, row: Any, what: str) -> None:
    if not row.owned:
        metrics.count_fenced_refusal(what)
        raise AttemptSuperseded(FencingToken(finish.run_id, finish.attempt), what)


def _common(finish: Finish) -> dict[str, Any]:
    rows = finish.rows
    return {
        **fence_params(FencingToken(finish.run_id, finish.attempt)),
        "e_thread_id": finish.thread_id,
        "e_tenant_id": finish.tenant_id,
        "e_seq": [r["seq"] for r in rows],
        "e_event": [r["event"] for r in rows],
        "e_data": [r["data"] for r in rows],
        "e_created_at": [r["created_at"] for r in rows],
        "e_expires_at": rows[-1]["expires_at"],
        "e_wrote_any": finish.wrote_any,
        "e_channel": NOTIFY_CHANNEL,
        "e_announce": finish.announce,
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
) -> tuple[ThreadStatus | None, int]:
    """End a run `error` without reading its thread's state (that read, or the full settle,
    is what failed): the run's final status, an `error` event and the `__end__` marker, the
    thread released (status error, its cached values kept; busy if other runs wait). Fenced
    like the settle; both dialects, one transaction. Returns the thread's new status and the
    seq of the `error` event."""
    async with transaction(engine) as conn:
        ended = await conn.execute(
            finish_queries.end_run(
                owns_run(token),
                tenant_id=tenant_id,
                status=RunStatus.ERROR.value,
                error=error,
                now=utcnow(),
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
        await conn.execute(finish_queries.insert_events(), [failed, end])
        await hub.set_expiry(conn, run_id=token.run_id, tenant_id=tenant_id)
        settled = await run_status.settle_thread(
            conn, tenant_id=tenant_id, thread_id=thread_id, status=ThreadStatus.ERROR, error=error
        )
        await hub.notify(conn, "e", token.run_id, thread_id=thread_id)
        if settled == ThreadStatus.BUSY:
            await hub.notify(conn, "q")
    return settled, seq

"""One claimed batch of due crons turned into runs, set-based, with each cron isolated.

The scheduler (app/crons/scheduler.py) claims a batch in one transaction; this module plans
every claimed row in Python first (schedule, decrypted payload, assistant, graph, the run's
payload checked), so a row that cannot fire fails alone, before any SQL, with a reason kept
in `crons.last_error`. Stateless firings (a new thread each) are then written as ONE
multi-row insert of their threads and ONE of their runs; firings on an existing thread go
through `RunService.create_in` (it applies the thread's multitask strategy), each in its own
SAVEPOINT so a failing one rolls back alone. If a batch insert fails, the batch is retried
row by row under savepoints: one poison row never stops the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.auth.principal import ANONYMOUS_USER, Principal
from app.crons import queries as q
from app.crons.schedule import next_after, parse_timezone
from app.crons.schemas import CronStatus
from app.db.sealed import open_json
from app.db.tables import SYSTEM_TENANT
from app.errors import AppError, Conflict, NotFound
from app.runs import prepare
from app.runs.schemas import RunCreate, new_run_id
from app.statuses import RunStatus, ThreadStatus

JSONObject = dict[str, Any]


class Outcome:
    """`graphkeep_cron_firings_total{outcome}`."""

    FIRED = "fired"
    SKIPPED_BUSY = "skipped_busy"  # thread cron with multitask_strategy=reject on a busy thread
    ASSISTANT_DELETED = CronStatus.ASSISTANT_DELETED
    THREAD_DELETED = CronStatus.THREAD_DELETED
    FAILED = "failed"  # this due time could not fire (last_error says why); the cron goes on
    ENDED = CronStatus.ENDED


@dataclass
class Firing:
    """One claimed cron: what its due time came to and the row's new state."""

    cron_id: str
    tenant_id: str
    outcome: str
    lag: float
    run_id: str | None = None
    thread_id: str | None = None
    graph_id: str | None = None
    error: str | None = None
    to_cancel: list[str] = field(default_factory=list)
    advance: JSONObject = field(default_factory=dict)
    # a stateless firing's rows, written by the batch insert
    thread_row: JSONObject | None = None
    run_row: JSONObject | None = None
    # a firing on an existing thread: RunService.create_in's arguments
    principal: Principal | None = None
    payload: RunCreate | None = None


def _advance(
    fired: Firing, row: Any, upcoming: datetime | None, status: str, *, enabled: bool | None = None
) -> None:
    fired.advance = {
        "b_cron_id": row.cron_id,
        "b_next_run_date": upcoming,
        "b_status": status,
        "b_enabled": row.enabled if enabled is None else enabled,
        "b_last_error": None,
    }


def fail(fired: Firing, reason: str) -> None:
    """This due time does not fire; the cron keeps its next slot and says why."""
    fired.outcome, fired.error = Outcome.FAILED, reason
    fired.thread_row = fired.run_row = fired.payload = None
    fired.advance["b_last_error"] = reason[:500]


class NextSlots:
    """`next_after` memoised for one tick: a claimed row is due by `now`, so its next slot is
    the first after `now`, the same for every row with its schedule and timezone."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._seen: dict[tuple[str, str], datetime] = {}

    def after(self, schedule: str, timezone: str, due: datetime) -> datetime:
        if due > self.now:  # not claimed by `now` (a caller's own clock): compute it
            return next_after(schedule, parse_timezone(timezone), due)
        key = (schedule, timezone)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = next_after(schedule, parse_timezone(timezone), self.now)
        return found


def plan(
    row: Any, assistants: dict[str, Any], graphs: Any, now: datetime, slots: NextSlots
) -> Firing:
    """Everything about one claimed row that needs no SQL; never raises."""
    due: datetime = row.next_run_date
    fired = Firing(
        cron_id=row.cron_id,
        tenant_id=row.tenant_id,
        outcome=Outcome.FIRED,
        lag=max(0.0, (now - due).total_seconds()),
    )
    end: datetime | None = row.end_time
    if end is not None and due > end:
        fired.outcome = Outcome.ENDED
        _advance(fired, row, None, CronStatus.ENDED)
        return fired
    try:
        upcoming: datetime | None = slots.after(row.schedule, row.timezone, due)
    except (AppError, ValueError, StopIteration):
        # no next slot can be computed: stop it rather than claim it on every tick
        _advance(fired, row, None, CronStatus.ACTIVE, enabled=False)
        fail(fired, f"schedule {row.schedule!r} in {row.timezone!r} has no next due time")
        return fired
    status = CronStatus.ACTIVE
    if end is not None and upcoming is not None and upcoming > end:
        upcoming, status = None, CronStatus.ENDED
    _advance(fired, row, upcoming, status)
    assistant = assistants.get(row.assistant_id)
    if assistant is None or assistant.tenant_id not in (row.tenant_id, SYSTEM_TENANT):
        fired.outcome = Outcome.ASSISTANT_DELETED
        _advance(fired, row, None, CronStatus.ASSISTANT_DELETED, enabled=False)
        return fired
    if not graphs.has(assistant.graph_id):
        fail(fired, f"graph {assistant.graph_id!r} is not registered on this server")
        return fired
    try:
        stored = open_json(row.payload)
    except Exception as exc:  # a key rotated away, a corrupt envelope: this row only
        fail(fired, f"payload does not decrypt ({type(exc).__name__})")
        return fired
    stateless = row.thread_id is None
    payload = dict(stored or {})
    payload["metadata"] = {**(payload.get("metadata") or {}), **(row.metadata or {})}
    payload["metadata"]["cron_id"] = row.cron_id
    if stateless:
        payload["on_completion"] = row.on_run_completed or "delete"
    # the creator's identity, kept with the cron; never anything a request sent
    principal = Principal(
        tenant_id=row.tenant_id, user_id=row.user_id or ANONYMOUS_USER, kind="cron"
    )
    try:
        run = RunCreate(assistant_id=row.assistant_id, **payload)
        prepare.validate(run, stateless=stateless, webhook_url=None)  # checked at create
    except (AppError, ValueError, TypeError) as exc:
        fail(fired, f"payload is not a valid run: {_short(exc)}")
        return fired
    fired.graph_id = assistant.graph_id
    if not stateless:
        fired.principal, fired.payload = principal, run
        return fired
    try:
        _stateless_rows(fired, row, run, principal, assistant, now)
    except (AppError, ValueError, TypeError) as exc:
        fail(fired, f"payload is not a valid run: {_short(exc)}")
    return fired


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _stateless_rows(
    fired: Firing, row: Any, run: RunCreate, principal: Principal, assistant: Any, now: datetime
) -> None:
    """The temporary thread and the run of a stateless firing, as RunService writes them."""
    run_id, thread_id = new_run_id(), new_run_id()
    kwargs = prepare.build_kwargs(
        run,
        principal=principal,
        run_id=run_id,
        thread_id=thread_id,
        assistant_id=row.assistant_id,
        graph_id=assistant.graph_id,
        assistant_config=assistant.config or {},
        assistant_context=assistant.context or {},
        headers={},
        temporary=True,
    )
    config_metadata = (run.config or {}).get("metadata") or {}
    thread_metadata = {
        **(config_metadata if isinstance(config_metadata, dict) else {}),
        **(run.metadata or {}),
        "graph_id": assistant.graph_id,
        "assistant_id": row.assistant_id,
    }
    fired.thread_row = {
        "thread_id": thread_id,
        "tenant_id": row.tenant_id,
        "status": ThreadStatus.BUSY,  # busy with this run from the start
        "metadata": thread_metadata,
        "config": kwargs["config"],
        "values": None,
        "interrupts": {},
        "error": None,
        "created_at": now,
        "updated_at": now,
        "state_updated_at": now,
    }
    fired.run_row = {
        "run_id": run_id,
        "tenant_id": row.tenant_id,
        "thread_id": thread_id,
        "assistant_id": row.assistant_id,
        "graph_id": assistant.graph_id,
        "status": RunStatus.PENDING,
        "metadata": prepare.run_metadata(
            run,
            assistant_metadata=assistant.metadata or {},
            thread_metadata=thread_metadata,
            assistant_id=row.assistant_id,
        ),
        "kwargs": kwargs,
        "multitask_strategy": "enqueue",
        "created_at": now,
        "updated_at": now,
        "available_at": now,
        "attempt": 0,
        "temporary": True,
        "worker_id": None,
        "lease_expires_at": None,
        "started_at": None,
    }
    fired.run_id, fired.thread_id = run_id, thread_id


async def write_stateless(conn: AsyncConnection, batch: list[Firing]) -> None:
    """All stateless firings in two multi-row inserts; on failure, row by row (savepoints)."""
    if not batch:
        return
    try:
        async with conn.begin_nested():
            await q.insert_fired(conn, batch)
        return
    except Exception:  # isolate the row that broke it, below
        pass
    for fired in batch:
        try:
            async with conn.begin_nested():
                await q.insert_fired(conn, [fired])
        except Exception as exc:  # this row fails, the others go on
            fired.run_id = fired.thread_id = None
            fail(fired, f"run insert failed ({type(exc).__name__})")


async def fire_on_thread(conn: AsyncConnection, fired: Firing, row: Any, runs: Any) -> None:
    """A thread cron's run through RunService (multitask strategy), in its own savepoint."""
    assert fired.principal is not None and fired.payload is not None
    try:
        async with conn.begin_nested():
            run, fired.to_cancel = await runs.create_in(
                conn, principal=fired.principal, thread_id=row.thread_id, payload=fired.payload
            )
        fired.run_id, fired.thread_id = run["run_id"], run["thread_id"]
    except NotFound:
        # raised before the create wrote anything: the cron stops and says why
        gone = CronStatus.ASSISTANT_DELETED
        if not await q.thread_exists(conn, tenant_id=row.tenant_id, thread_id=row.thread_id):
            gone = CronStatus.THREAD_DELETED
        fired.outcome = gone
        _advance(fired, row, None, gone, enabled=False)
    except Conflict:
        fired.outcome = Outcome.SKIPPED_BUSY
    except Exception as exc:  # this row fails, the others go on
        fail(fired, f"run create failed: {_short(exc)}")
    finally:
        fired.principal = fired.payload = None

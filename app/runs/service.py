"""Run use cases: create (with multitask strategies), read, list, cancel, delete, results.

Creating a run is one path on both databases. It reads the assistant and the thread in one
statement, then, when the thread is new or idle (the common case), writes the run with
`queries.quick_create`: conditional on the thread being as read, so nothing else can slip in
between (PostgreSQL: one autocommitted statement that also sends the NOTIFY; SQLite: two in
its write transaction). A busy thread, or one that changed since the read, takes the locking
transaction instead: the thread row locked, the multitask strategy applied to the runs in
flight, the new run, the thread marked busy and the NOTIFY that wakes idle workers on commit.
A strict resume (app/runs/resume.py) is judged in the same transaction as the write.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.assistants import queries as assistant_queries
from app.assistants.service import resolve_assistant_id
from app.auth.principal import Principal
from app.db.access import read, transaction
from app.db.ids import parse_uuid
from app.db.types import utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.runs import notify, queries, resume
from app.runs.events import EventHub, StreamEvent
from app.runs.models import LocalWorkers, NewRun, Run, thread_output
from app.runs.notify import NOTIFY_CHANNEL
from app.runs.protocol_runs import log_cancelled_before_start
from app.runs.queue import ClaimedRun
from app.runs.schemas import RunCreate
from app.runs.threadlog.log import ThreadLog
from app.statuses import RunStatus, ThreadStatus
from app.threads import run_status

JSONObject = dict[str, Any]
_NOT_FOUND = "Thread or assistant not found."


class _NothingWritten(Exception):
    """A quick create statement found the thread not as read: nothing of it is written."""


class RunService:
    """Run operations for the API; execution happens in the workers (app/runs/worker.py).

    `workers`: this process's worker slots, when it has any; a run created while one is free
    is inserted already claimed and starts on it directly."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        hub: EventHub,
        graphs: Any,
        saver: Any,
        workers: LocalWorkers | None = None,
    ) -> None:
        self.engine = engine
        self.hub = hub
        self.graphs = graphs
        self.saver = saver
        self._workers = workers
        self.thread_log = ThreadLog(engine, hub)

    # ------------------------------------------------------------------ create

    async def create(
        self,
        *,
        principal: Principal,
        thread_id: str | None,
        payload: RunCreate,
        headers: Mapping[str, str],
    ) -> Run:
        """Queue a run; `thread_id=None` makes a stateless run on a temporary thread. The
        answer is the run as written: `running` when a local slot took it at once."""
        try:
            assistant_id = resolve_assistant_id(payload.assistant_id, graphs=self.graphs)
        except ValidationFailed:
            # Neither a UUID nor a registered graph id: an unknown graph (official: 404).
            raise NotFound(f"Graph '{payload.assistant_id}' not found") from None
        new = NewRun.build(principal, thread_id, payload, headers, assistant_id, self.graphs.config)
        pool = self._workers
        reserved = pool is not None and new.available <= new.now and pool.try_reserve()
        dispatched: ClaimedRun | None = None
        try:
            created, dispatched, to_cancel = await self._write(new, direct=reserved)
        finally:
            if reserved and dispatched is None and pool is not None:
                pool.unreserve()
        if dispatched is not None and pool is not None:
            pool.launch_reserved(dispatched)
        else:
            self.hub.queue_wakeup.set()
        metrics.count_run_created(created.graph_id)
        self._stop(to_cancel)
        return Run.from_row(created)

    async def create_in(
        self,
        conn: AsyncConnection,
        *,
        principal: Principal,
        thread_id: str | None,
        payload: RunCreate,
    ) -> tuple[JSONObject, list[str]]:
        """Queue a run inside the caller's open transaction (the cron scheduler's claim), so
        the run exists exactly when the caller's other writes commit. Validation, 404 and 409
        are raised before anything is written. Returns the run and the running runs a
        strategy asked to stop. Before committing call `notify_queued` once (for any number
        of runs created so), and `after_commit` with the runs to stop once committed."""
        assistant_id = resolve_assistant_id(payload.assistant_id, graphs=self.graphs)
        new = NewRun.build(principal, thread_id, payload, {}, assistant_id, self.graphs.config)
        new = dataclasses.replace(new, available=new.now)  # a cron's run is due when it fires
        created, _, to_cancel = await self._locked(new, direct=False, conn=conn)
        metrics.count_run_created(created.graph_id)
        return Run.from_row(created).to_json(), to_cancel

    async def notify_queued(self, conn: AsyncConnection) -> None:
        """Wake other processes' workers when `conn`'s transaction commits."""
        await self.hub.notify(conn, "q")

    def after_commit(self, to_cancel: list[str]) -> None:
        """What `create` does once its transaction committed: wake the workers, stop the
        runs a multitask strategy interrupted."""
        self.hub.queue_wakeup.set()
        self._stop(to_cancel)

    def _stop(self, to_cancel: list[str]) -> None:
        for other in to_cancel:
            self.hub.deliver_cancel(other)
            self.hub.wake(other)

    def _direct(self, direct: bool) -> LocalWorkers | None:
        """The pool a run is inserted claimed by: only with a reserved slot."""
        return self._workers if direct else None

    async def _write(
        self, new: NewRun, *, direct: bool
    ) -> tuple[Row[Any], ClaimedRun | None, list[str]]:
        """The create's writes (module docstring): the quick statements for a new or idle
        thread, else the locking transaction. With `direct` (a local slot is reserved) and
        nothing else in flight on the thread, the run is inserted already claimed by this
        process's pool: no claim round trip and no durable commit between creating and
        starting it."""
        try:
            # one connection for the read and the writes: autocommitted statements on
            # PostgreSQL, one write transaction on SQLite (app.db.access)
            async with transaction(self.engine, one_statement=True) as conn:
                seen = (
                    await conn.execute(
                        queries.create_snapshot(),
                        {
                            "assistant_id": new.assistant_id,
                            "tenant_id": new.tenant_id,
                            "thread_id": new.thread_id,
                        },
                    )
                ).first()
                if seen is None or not self.graphs.has(seen.graph_id):
                    raise NotFound(_NOT_FOUND)
                found = seen.thread_status is not None
                reject = (new.payload.if_not_exists or "reject") == "reject"
                if not found and not new.stateless and reject:
                    raise NotFound(_NOT_FOUND)
                if found and seen.thread_status == ThreadStatus.BUSY:
                    raise _NothingWritten  # the strategy decides: the locking transaction
                if found:
                    self._judge_resume(new, seen.thread_interrupts)
                row, kwargs = await self._quick(conn, new, seen, direct=direct)
        except _NothingWritten:
            if not found:  # ON CONFLICT DO NOTHING: the id is taken (by anyone)
                raise Conflict(f"Thread '{new.thread_id}' already exists") from None
        else:
            return row, new.first_attempt(row, kwargs) if direct else None, []
        return await self._locked(new, direct=direct)

    async def _quick(
        self, conn: AsyncConnection, new: NewRun, seen: Row[Any], *, direct: bool
    ) -> tuple[Row[Any], JSONObject]:
        """`queries.quick_create` on `conn` (a new thread, or the idle one as `seen`): the
        run row and its kwargs; `_NothingWritten` when the thread is not as read."""
        kwargs = new.graph_kwargs(seen)
        graph_id = seen.graph_id
        new_thread = seen.thread_status is None
        if new_thread:
            thread_metadata = new.thread_metadata(graph_id)
            merged = thread_metadata
        else:
            thread_metadata = dict(seen.thread_metadata or {})
            merged = new.marked_metadata(thread_metadata, graph_id)
        row = new.run_row(seen, thread_metadata, kwargs, claimed_by=self._direct(direct))
        params: JSONObject = {f"r_{column}": value for column, value in row.items()}
        params.update({f"t_{c}": v for c, v in new.thread_row(merged, kwargs["config"]).items()})
        params.update(
            channel=NOTIFY_CHANNEL,
            payload=notify.queued(self.hub.origin),
            seen_metadata=seen.thread_metadata,
            seen_state_at=seen.thread_state_at,
        )
        dialect = self.engine.dialect.name
        # a queued run wakes other processes' idle workers (this one's: `create`)
        announce = not direct and self.hub.others_listen
        statements, at = queries.quick_create(dialect, new_thread=new_thread, notify=announce)
        rows: list[Row[Any]] = []
        for statement in statements:
            written = (await conn.execute(statement, params)).first()
            if written is None:
                raise _NothingWritten  # rolls back what the earlier ones wrote
            rows.append(written)
        return rows[at], kwargs

    def _judge_resume(self, new: NewRun, interrupts: Any) -> None:
        """409 now when the thread (idle, nothing in flight) cannot take the strict resume."""
        if new.payload.strict_resume and not new.stateless:
            resume.check(new.payload.command, interrupts)

    async def _locked(
        self, new: NewRun, *, direct: bool, conn: AsyncConnection | None = None
    ) -> tuple[Row[Any], ClaimedRun | None, list[str]]:
        """The create in one transaction, the thread row locked (or in the caller's `conn`,
        which then sends one NOTIFY for all its runs)."""
        tenant_id, thread_id = new.tenant_id, new.thread_id
        to_cancel: list[str] = []
        joined = conn is not None
        async with (
            transaction(self.engine) if conn is None else contextlib.nullcontext(conn) as conn
        ):
            assistant = await assistant_queries.find_row(
                conn, tenant_id=tenant_id, assistant_id=new.assistant_id
            )
            if assistant is None or not self.graphs.has(assistant.graph_id):
                raise NotFound(_NOT_FOUND)
            kwargs = new.graph_kwargs(assistant)
            thread = (
                None
                if new.stateless
                else (await conn.execute(queries.lock_thread(tenant_id, thread_id))).first()
            )
            if thread is None:
                if not new.stateless and (new.payload.if_not_exists or "reject") == "reject":
                    raise NotFound(_NOT_FOUND)
                thread_metadata = new.thread_metadata(assistant.graph_id)
                await run_status.insert_thread_for_run(
                    conn,
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    metadata=thread_metadata,
                    config=kwargs["config"],
                    now=new.now,
                )
            else:
                thread_metadata = dict(thread.metadata or {})
                # A busy thread has runs in flight (busy is kept in the same transactions that
                # add and settle runs). An idle one may still have one: a run that ended while
                # this run was being added to the thread settles it from a snapshot taken
                # before (READ COMMITTED), so look at the runs too.
                busy = thread.status == ThreadStatus.BUSY or await run_status.has_active_runs(
                    conn, tenant_id=tenant_id, thread_id=thread_id
                )
                if busy:
                    direct = False  # queue behind what is in flight
                    to_cancel = await self._apply_strategy(
                        conn, tenant_id=tenant_id, thread_id=thread_id, strategy=new.strategy
                    )
                else:
                    self._judge_resume(new, thread.interrupts)
            row = new.run_row(assistant, thread_metadata, kwargs, claimed_by=self._direct(direct))
            created = (await conn.execute(queries.insert_run(row))).one()
            if thread is not None:  # a new thread was inserted busy already
                await run_status.mark_thread_busy(
                    conn,
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    metadata=new.marked_metadata(thread_metadata, assistant.graph_id),
                    config=kwargs["config"],
                )
            if not direct and not joined:
                await self.hub.notify(conn, "q")
        dispatched = new.first_attempt(created, kwargs) if direct else None
        return created, dispatched, to_cancel

    async def _apply_strategy(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str, strategy: str
    ) -> list[str]:
        """Handle runs in flight on the thread; returns running runs asked to stop."""
        inflight = (await conn.execute(queries.inflight_runs(tenant_id, thread_id))).all()
        if not inflight or strategy == "enqueue":
            return []
        if strategy == "reject":
            raise Conflict(
                "Thread is already running a task. Wait for it to finish or choose a different "
                "multitask strategy."
            )
        action = "rollback" if strategy == "rollback" else "interrupt"
        return [
            r.run_id
            for r in inflight
            if await self._cancel_row(conn, r, action=action, reason=f"multitask_{strategy}")
        ]

    async def _cancel_row(
        self, conn: AsyncConnection, row: Row[Any], *, action: str, reason: str
    ) -> bool:
        """Cancel one active run in `conn`'s transaction; True if a worker must stop it."""
        now = utcnow()
        tenant_id, run_id = row.tenant_id, row.run_id
        if row.status == RunStatus.RUNNING:
            await conn.execute(
                queries.ask_to_stop(tenant_id, run_id, action=action, reason=reason, now=now)
            )
            await self.hub.notify(conn, "c", run_id)
            return True
        # Pending: nobody executes it, so it ends here and now.
        if action == "rollback":
            await conn.execute(queries.delete_run(tenant_id, run_id))
        else:
            await conn.execute(
                queries.interrupt_pending(tenant_id, run_id, action=action, reason=reason, now=now)
            )
        await self.hub.close_stream(
            conn, run_id=run_id, thread_id=row.thread_id, tenant_id=tenant_id
        )
        return False

    # ------------------------------------------------------------------ read

    async def get(self, *, tenant_id: str, thread_id: str | None, run_id: str) -> Run:
        """The run (`Run.to_json` is the contract's Run object), or 404."""
        run_id = parse_uuid(run_id, what="run_id")
        if thread_id is not None:
            thread_id = parse_uuid(thread_id, what="thread_id")
        async with read(self.engine) as conn:
            row = (await conn.execute(*queries.run_row(tenant_id, run_id, thread_id))).first()
        if row is None:
            raise NotFound(f"Run '{run_id}' not found")
        return Run.from_row(row)

    async def list_runs(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        limit: int,
        offset: int,
        status: str | None,
    ) -> list[Run]:
        """A thread's runs, newest first; 404 if the thread is missing (`Run.to_json(timing=
        True)` adds the attempt count, start and end times and the error the console shows)."""
        thread_id = parse_uuid(thread_id, what="thread_id")
        async with read(self.engine) as conn:
            if (await conn.execute(queries.thread_exists(tenant_id, thread_id))).first() is None:
                raise NotFound(f"Thread '{thread_id}' not found")
            rows = (
                await conn.execute(
                    queries.thread_runs(
                        tenant_id, thread_id, status=status, limit=limit, offset=offset
                    )
                )
            ).all()
        return [Run.from_row(r) for r in rows]

    # ------------------------------------------------------------------ cancel / delete

    async def cancel(self, *, tenant_id: str, thread_id: str, run_id: str, action: str) -> None:
        """Cancel one pending or running run (404 if it is neither)."""
        await self.cancel_many(
            tenant_id=tenant_id, thread_id=thread_id, run_ids=[run_id], status=None, action=action
        )

    async def cancel_many(
        self,
        *,
        tenant_id: str,
        thread_id: str | None,
        run_ids: list[str] | None,
        status: str | None,
        action: str,
    ) -> None:
        """Cancel by ids (on one thread) or by status (`pending`, `running`, `all`)."""
        action = "rollback" if action == "rollback" else "interrupt"
        stmt = queries.runs_to_cancel(
            tenant_id,
            run_ids=None if run_ids is None else [parse_uuid(r, what="run_id") for r in run_ids],
            thread_id=None if thread_id is None else parse_uuid(thread_id, what="thread_id"),
            status=status,
        )
        stopping: list[str] = []
        settled: list[Row[Any]] = []
        async with transaction(self.engine) as conn:
            rows = (await conn.execute(stmt)).all()
            if not rows:
                raise NotFound("No matching runs to cancel")
            for row in rows:
                if await self._cancel_row(conn, row, action=action, reason=f"cancel_{action}"):
                    stopping.append(row.run_id)
                else:
                    settled.append(row)
            for row in settled:
                await self._settle_after_pending_cancel(conn, row)
        for run_id in stopping:
            self.hub.deliver_cancel(run_id)
        for row in settled:
            self.hub.wake(row.run_id)
            if action == "interrupt":
                await log_cancelled_before_start(self.thread_log, row)
        self.hub.queue_wakeup.set()

    async def _settle_after_pending_cancel(self, conn: AsyncConnection, row: Row[Any]) -> None:
        thread = (
            await conn.execute(queries.thread_error_and_interrupts(row.tenant_id, row.thread_id))
        ).first()
        if thread is None:
            return
        if thread.error:
            status = ThreadStatus.ERROR
        else:
            status = ThreadStatus.INTERRUPTED if thread.interrupts else ThreadStatus.IDLE
        await run_status.settle_thread(
            conn,
            tenant_id=row.tenant_id,
            thread_id=row.thread_id,
            status=status,
            error=thread.error,
        )

    async def delete(self, *, tenant_id: str, thread_id: str, run_id: str) -> None:
        """Delete a run and the checkpoints it wrote (an active run is rolled back)."""
        thread_id = parse_uuid(thread_id, what="thread_id")
        run_id = parse_uuid(run_id, what="run_id")
        async with transaction(self.engine) as conn:
            row = (await conn.execute(*queries.run_row(tenant_id, run_id, thread_id))).first()
            if row is None:
                raise NotFound(f"Run '{run_id}' not found")
            if RunStatus(row.status).is_active:
                stopping = await self._cancel_row(conn, row, action="rollback", reason="deleted")
            else:
                stopping = False
                await conn.execute(queries.delete_run(tenant_id, run_id))
        if stopping:
            self.hub.deliver_cancel(run_id)
        else:
            await self.saver.for_tenant(tenant_id).adelete_for_runs([run_id])

    # ------------------------------------------------------------------ results

    def stream(
        self, *, tenant_id: str, run_id: str, after_seq: int | None, fresh: bool = False
    ) -> AsyncIterator[StreamEvent | None]:
        """The run's events after `after_seq` (None: live only); None items are keep-alives.

        `fresh`: the run was created by this request (nothing stored yet)."""
        return self.hub.read(run_id, tenant_id=tenant_id, after_seq=after_seq, fresh=fresh)

    async def wait_output(
        self, *, tenant_id: str, thread_id: str, run_id: str, from_start: bool
    ) -> AsyncIterator[JSONObject | None]:
        """Keep-alive Nones, then the run's output (contract 5.6)."""
        last_values: str | None = None
        error: str | None = None
        async for ev in self.hub.read(
            run_id,
            tenant_id=tenant_id,
            after_seq=0 if from_start else None,
            fresh=from_start,
            live=False,
        ):
            if ev is None:
                yield None
            elif ev.event == "values":
                last_values = ev.data
            elif ev.event == "error":
                error = ev.data
        if error is not None:
            yield {"__error__": orjson.loads(error)}
        elif last_values is not None:
            yield orjson.loads(last_values)
        else:
            yield await self.thread_output(tenant_id=tenant_id, thread_id=thread_id)

    async def thread_output(self, *, tenant_id: str, thread_id: str) -> JSONObject:
        """A finished run's output from its thread: values, error or interrupts."""
        async with read(self.engine) as conn:
            row = (await conn.execute(queries.thread_outcome(tenant_id, thread_id))).first()
        return {} if row is None else thread_output(row)

"""Run use cases: create (with multitask strategies), read, list, cancel, delete, results.

Creating a run is one transaction: the thread row (created or locked), the strategy applied to
runs already in flight on it, the new `pending` run, the thread marked busy and a NOTIFY that
wakes idle workers on commit.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Text, bindparam, cast, delete, exists, func, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.assistants import queries as assistant_queries
from app.assistants.service import resolve_assistant_id
from app.auth.principal import Principal
from app.db.dialect import reader
from app.db.direct import DirectExecutor, DirectStatement
from app.db.tables import SYSTEM_TENANT, assistants, runs, threads
from app.db.types import utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.runs import notify, prepare
from app.runs.events import EventHub, StreamEvent
from app.runs.notify import NOTIFY_CHANNEL
from app.runs.queue import ACTIVE_STATUSES, ClaimedRun
from app.runs.schemas import RunCreate, new_run_id, run_json, run_timing
from app.threads import run_status

if TYPE_CHECKING:
    from app.runs.worker import WorkerPool

JSONObject = dict[str, Any]


def _uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise ValidationFailed(f"{what}: {value!r} is not a valid UUID") from None


_THREAD_COLUMNS = (
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
_RUN_COLUMNS = (
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


@functools.cache
def _stateless_insert(*, notify: bool) -> Any:
    """PostgreSQL: insert a temporary thread (busy) and its run in one statement, returning
    the run row; no row when the thread id is taken. With `notify`, the statement also sends
    the NOTIFY that wakes idle workers (delivered on its commit)."""
    new_thread = (
        postgresql.insert(threads)
        .values({c: bindparam(f"t_{c}", type_=threads.c[c].type) for c in _THREAD_COLUMNS})
        .on_conflict_do_nothing(index_elements=["thread_id"])
        .returning(threads.c.thread_id)
        .cte("new_thread")
    )
    values = select(*[bindparam(f"r_{c}", type_=runs.c[c].type) for c in _RUN_COLUMNS]).select_from(
        new_thread
    )
    returned: list[Any] = list(runs.c)
    if notify:
        wake = func.pg_notify(bindparam("channel", type_=Text), bindparam("payload", type_=Text))
        returned.append(cast(wake, Text).label("notified"))
    new_run = (
        runs.insert().from_select(list(_RUN_COLUMNS), values).returning(*returned).cte("new_run")
    )
    return select(*new_run.c)


@functools.cache
def _thread_insert(*, notify: bool) -> Any:
    """PostgreSQL: a run on an existing thread in one statement, when the thread is not busy
    and its metadata is still what the caller read (`seen_metadata`): lock the thread row,
    insert the run, mark the thread busy with its new metadata and config; returns the run
    row, or nothing (busy, gone or changed meanwhile: the caller takes the transaction path,
    which applies the multitask strategy). With `notify`, also the NOTIFY for idle workers."""
    thread = (
        select(threads.c.thread_id, threads.c.tenant_id)
        .where(
            threads.c.thread_id == bindparam("r_thread_id", type_=threads.c.thread_id.type),
            threads.c.tenant_id == bindparam("r_tenant_id", type_=threads.c.tenant_id.type),
            threads.c.status != "busy",
            threads.c.metadata == bindparam("seen_metadata", type_=threads.c.metadata.type),
            ~exists().where(  # see `_insert_run`: idle may be stale
                runs.c.thread_id == threads.c.thread_id,
                runs.c.tenant_id == threads.c.tenant_id,
                runs.c.status.in_(ACTIVE_STATUSES),
            ),
        )
        .with_for_update()
        .cte("idle_thread")
    )
    values = select(*[bindparam(f"r_{c}", type_=runs.c[c].type) for c in _RUN_COLUMNS]).select_from(
        thread
    )
    new_run = (
        runs.insert().from_select(list(_RUN_COLUMNS), values).returning(*runs.c).cte("new_run")
    )
    busy = (
        threads.update()
        .where(
            threads.c.thread_id == new_run.c.thread_id,
            threads.c.tenant_id == new_run.c.tenant_id,
        )
        .values(
            status="busy",
            metadata=bindparam("t_metadata", type_=threads.c.metadata.type),
            config=bindparam("t_config", type_=threads.c.config.type),
            updated_at=bindparam("t_updated_at", type_=threads.c.updated_at.type),
        )
        .cte("busy_thread")
    )
    returned: list[Any] = list(new_run.c)
    if notify:
        wake = func.pg_notify(bindparam("channel", type_=Text), bindparam("payload", type_=Text))
        returned.append(cast(wake, Text).label("notified"))
    return select(*returned).add_cte(busy)


@dataclass(frozen=True)
class _DirectCreate:
    """The statements of a run's creation on PostgreSQL, pre-compiled for an engine."""

    run: DirectExecutor
    assistant: DirectStatement
    thread: DirectStatement
    stateless: dict[bool, DirectStatement]  # by `notify`
    on_thread: dict[bool, DirectStatement]


_DIRECT: weakref.WeakKeyDictionary[AsyncEngine, _DirectCreate] = weakref.WeakKeyDictionary()


def _direct_create(engine: AsyncEngine) -> _DirectCreate:
    found = _DIRECT.get(engine)
    if found is None:
        run = DirectExecutor(reader(engine))
        assistant = select(assistants).where(
            assistants.c.assistant_id == bindparam("assistant_id"),
            or_(  # the tenant's own and the shared system assistants (queries.visible_to)
                assistants.c.tenant_id == bindparam("tenant_id"),
                assistants.c.tenant_id == SYSTEM_TENANT,
            ),
        )
        thread = select(threads.c.status, threads.c.metadata).where(
            threads.c.thread_id == bindparam("thread_id"),
            threads.c.tenant_id == bindparam("tenant_id"),
        )
        found = _DIRECT[engine] = _DirectCreate(
            run=run,
            assistant=run.prepare(assistant),
            thread=run.prepare(thread),
            stateless={n: run.prepare(_stateless_insert(notify=n)) for n in (False, True)},
            on_thread={n: run.prepare(_thread_insert(notify=n)) for n in (False, True)},
        )
    return found


class RunService:
    """Run operations for the API; execution happens in the workers (app/runs/worker.py)."""

    def __init__(self, *, engine: AsyncEngine, hub: EventHub, graphs: Any, saver: Any) -> None:
        self.engine = engine
        self.hub = hub
        self.graphs = graphs
        self.saver = saver
        # This process's workers, when it has any: runs created here start on them directly.
        self.local_pool: WorkerPool | None = None
        # PostgreSQL creates a stateless run and its thread in one statement
        self._one_statement_create = engine.dialect.name == "postgresql"

    # ------------------------------------------------------------------ create

    async def create(
        self,
        *,
        principal: Principal,
        thread_id: str | None,
        payload: RunCreate,
        headers: Mapping[str, str],
    ) -> JSONObject:
        """Queue a run; `thread_id=None` makes a stateless run on a temporary thread."""
        stateless = thread_id is None
        prepare.validate(payload, stateless=stateless)
        try:
            assistant_id = resolve_assistant_id(payload.assistant_id, graphs=self.graphs)
        except ValidationFailed:
            # Neither a UUID nor a registered graph id: an unknown graph (official: 404).
            raise NotFound(f"Graph '{payload.assistant_id}' not found") from None
        run_id = new_run_id()
        thread_id = new_run_id() if thread_id is None else _uuid(thread_id, "thread_id")
        now = utcnow()
        available = now + timedelta(seconds=payload.after_seconds or 0)
        strategy = payload.multitask_strategy or "enqueue"
        to_cancel: list[str] = []
        pool = self.local_pool
        reserved = pool is not None and available <= now and pool.try_reserve()
        dispatched: ClaimedRun | None = None
        try:
            new = _NewRun(
                principal=principal,
                payload=payload,
                stateless=stateless,
                run_id=run_id,
                thread_id=thread_id,
                assistant_id=assistant_id,
                now=now,
                available=available,
                strategy=strategy,
                headers=headers,
            )
            created, dispatched, to_cancel, graph_id = await self._insert_run(new, direct=reserved)
        finally:
            if reserved and dispatched is None and pool is not None:
                pool.unreserve()
        if dispatched is not None and pool is not None:
            pool.launch_reserved(dispatched)
        else:
            self.hub.queue_wakeup.set()
        metrics.count_run_created(graph_id)
        for other in to_cancel:
            self.hub.deliver_cancel(other)
            self.hub.wake(other)
        out = run_json(created)
        # The contract answers a create with the run as queued; a directly dispatched run is
        # already `running` in the database (GET shows it), which is the same moment later.
        out["status"] = "pending"
        return out

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
        prepare.validate(payload, stateless=thread_id is None)
        now = utcnow()
        new = _NewRun(
            principal=principal,
            payload=payload,
            stateless=thread_id is None,
            run_id=new_run_id(),
            thread_id=new_run_id() if thread_id is None else _uuid(thread_id, "thread_id"),
            assistant_id=resolve_assistant_id(payload.assistant_id, graphs=self.graphs),
            now=now,
            available=now,
            strategy=payload.multitask_strategy or "enqueue",
            headers={},
        )
        created, _, to_cancel, graph_id = await self._insert_run(new, direct=False, conn=conn)
        metrics.count_run_created(graph_id)
        return run_json(created), to_cancel

    async def notify_queued(self, conn: AsyncConnection) -> None:
        """Wake other processes' workers when `conn`'s transaction commits."""
        await self.hub.notify(conn, "q")

    def after_commit(self, to_cancel: list[str]) -> None:
        """What `create` does once its transaction committed: wake the workers, stop the
        runs a multitask strategy interrupted."""
        self.hub.queue_wakeup.set()
        for other in to_cancel:
            self.hub.deliver_cancel(other)
            self.hub.wake(other)

    async def _insert_run(
        self,
        new: _NewRun,
        *,
        direct: bool,
        conn: AsyncConnection | None = None,
    ) -> tuple[Row[Any], ClaimedRun | None, list[str], str]:
        """The create transaction. With `direct` (a local slot is reserved) and nothing else
        in flight on the thread, the run is inserted already claimed by this process's pool:
        no claim round trip and no durable commit between creating and starting it. With
        `conn`, its statements run in that open transaction instead of one of their own."""
        tenant_id, thread_id, assistant_id = new.tenant_id, new.thread_id, new.assistant_id
        payload, stateless, now = new.payload, new.stateless, new.now
        to_cancel: list[str] = []
        joined = conn is not None  # the caller's transaction: it sends one NOTIFY for all
        if self._one_statement_create and not joined:
            fast = await self._insert_fast(new, direct=direct)
            if fast is not None:
                return fast
        async with self.engine.begin() if conn is None else contextlib.nullcontext(conn) as conn:
            assistant = await assistant_queries.find_row(
                conn, tenant_id=tenant_id, assistant_id=assistant_id
            )
            if assistant is None or not self.graphs.has(assistant.graph_id):
                raise NotFound("Thread or assistant not found.")
            kwargs = new.graph_kwargs(assistant)
            thread = (
                None
                if stateless
                else await run_status.lock_thread(conn, tenant_id=tenant_id, thread_id=thread_id)
            )
            if thread is None:
                if not stateless and (payload.if_not_exists or "reject") == "reject":
                    raise NotFound("Thread or assistant not found.")
                metadata = new.thread_metadata(assistant.graph_id)
                await run_status.insert_thread_for_run(
                    conn,
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    metadata=metadata,
                    config=kwargs["config"],
                    now=now,
                )
                thread_metadata: JSONObject = metadata
            else:
                thread_metadata = dict(thread.metadata or {})
                # A busy thread has runs in flight (busy is kept in the same transactions that
                # add and settle runs). An idle one may still have one: a run that ended while
                # this run was being added to the thread settles it from a snapshot taken
                # before (READ COMMITTED), so look at the runs too.
                busy = thread.status == "busy" or await run_status.has_active_runs(
                    conn, tenant_id=tenant_id, thread_id=thread_id
                )
                if busy:
                    direct = False  # queue behind what is in flight
                    to_cancel = await self._apply_strategy(
                        conn, tenant_id=tenant_id, thread_id=thread_id, strategy=new.strategy
                    )
            pool = self.local_pool
            row = new.run_row(
                assistant, thread_metadata, kwargs, claimed_by=pool if direct else None
            )
            created = (await conn.execute(runs.insert().values(**row).returning(runs))).one()
            if thread is not None:  # a new thread was inserted busy already
                await run_status.mark_thread_busy(
                    conn,
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    metadata={
                        **thread_metadata,
                        "graph_id": assistant.graph_id,
                        "assistant_id": assistant_id,
                    },
                    config=kwargs["config"],
                )
            if not (direct and pool is not None) and not joined:
                await self.hub.notify(conn, "q")
        dispatched = None
        if direct and pool is not None:  # handed to a local worker slot without a claim
            dispatched = new.first_attempt(created, assistant.graph_id, kwargs)
        return created, dispatched, to_cancel, assistant.graph_id

    async def _insert_fast(
        self,
        new: _NewRun,
        *,
        direct: bool,
    ) -> tuple[Row[Any], ClaimedRun | None, list[str], str] | None:
        """`_insert_run` on PostgreSQL in autocommitted statements on one connection: the
        assistant read, then (stateless) the temporary thread and the run in ONE statement
        (`_stateless_insert`): two round trips instead of BEGIN, three statements and COMMIT;
        or (a thread that is not busy) the thread read, then lock, run insert and busy mark in
        ONE statement (`_thread_insert`): three instead of six. None: the thread is missing,
        busy or changed meanwhile; the caller takes the transaction path."""
        tenant_id, thread_id, assistant_id = new.tenant_id, new.thread_id, new.assistant_id
        stateless, now = new.stateless, new.now
        pool = self.local_pool
        direct = direct and pool is not None
        statements = _direct_create(self.engine)
        # pre-compiled, on one pooled connection (app/db/direct.py)
        async with statements.run.session() as conn:
            found = await conn.fetch(
                statements.assistant, {"assistant_id": assistant_id, "tenant_id": tenant_id}
            )
            assistant = found[0] if found else None
            if assistant is None or not self.graphs.has(assistant.graph_id):
                raise NotFound("Thread or assistant not found.")
            seen: Any = None
            if not stateless:
                found = await conn.fetch(
                    statements.thread, {"thread_id": thread_id, "tenant_id": tenant_id}
                )
                seen = found[0] if found else None
                if seen is None or seen.status == "busy":
                    return None  # create it (if_not_exists) or apply the strategy
            kwargs = new.graph_kwargs(assistant)
            if seen is None:
                thread_metadata = new.thread_metadata(assistant.graph_id)
            else:
                thread_metadata = dict(seen.metadata or {})
            params: dict[str, Any] = {
                "t_thread_id": thread_id,
                "t_tenant_id": tenant_id,
                "t_status": "busy",  # busy with this run from the start
                "t_metadata": thread_metadata,
                "t_config": kwargs["config"],
                "t_values": None,
                "t_interrupts": {},
                "t_error": None,
                "t_created_at": now,
                "t_updated_at": now,
                "t_state_updated_at": now,
                **{
                    f"r_{column}": value
                    for column, value in new.run_row(
                        assistant, thread_metadata, kwargs, claimed_by=pool if direct else None
                    ).items()
                },
                "channel": NOTIFY_CHANNEL,
                "payload": notify.queued(self.hub.origin),
            }
            if seen is None:
                statement = statements.stateless[not direct]
            else:
                statement = statements.on_thread[not direct]
                params.update(
                    seen_metadata=seen.metadata,
                    t_metadata={
                        **thread_metadata,
                        "graph_id": assistant.graph_id,
                        "assistant_id": assistant_id,
                    },
                    t_updated_at=now,
                )
            found = await conn.fetch(statement, params)
            created = found[0] if found else None
        if created is None:
            if seen is not None:
                return None  # busy or changed since read: the transaction path decides
            raise Conflict(f"Thread '{thread_id}' already exists")  # ON CONFLICT DO NOTHING
        dispatched = None
        if direct and pool is not None:  # handed to a local worker slot without a claim
            dispatched = new.first_attempt(created, assistant.graph_id, kwargs)
        return created, dispatched, [], assistant.graph_id

    async def _apply_strategy(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str, strategy: str
    ) -> list[str]:
        """Handle runs in flight on the thread; returns running runs asked to stop."""
        inflight = (
            await conn.execute(
                select(runs).where(
                    runs.c.thread_id == thread_id,
                    runs.c.tenant_id == tenant_id,
                    runs.c.status.in_(ACTIVE_STATUSES),
                )
            )
        ).all()
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
        if row.status == "running":
            await conn.execute(
                runs.update()
                .where(runs.c.run_id == row.run_id, runs.c.tenant_id == row.tenant_id)
                .values(cancel_action=action, cancel_reason=reason, updated_at=now)
            )
            await self.hub.notify(conn, "c", row.run_id)
            return True
        # Pending: nobody executes it, so it ends here and now.
        if action == "rollback":
            await conn.execute(
                delete(runs).where(runs.c.run_id == row.run_id, runs.c.tenant_id == row.tenant_id)
            )
        else:
            await conn.execute(
                runs.update()
                .where(runs.c.run_id == row.run_id, runs.c.tenant_id == row.tenant_id)
                .values(
                    status="interrupted",
                    cancel_action=action,
                    cancel_reason=reason,
                    ended_at=now,
                    updated_at=now,
                )
            )
        await self.hub.close_stream(
            conn, run_id=row.run_id, thread_id=row.thread_id, tenant_id=row.tenant_id
        )
        return False

    # ------------------------------------------------------------------ read

    async def _row(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str | None, run_id: str
    ) -> Row[Any] | None:
        stmt = select(runs).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
        if thread_id is not None:
            stmt = stmt.where(runs.c.thread_id == thread_id)
        return (await conn.execute(stmt)).first()

    async def get(self, *, tenant_id: str, thread_id: str | None, run_id: str) -> JSONObject:
        """The run, or 404."""
        run_id = _uuid(run_id, "run_id")
        if thread_id is not None:
            thread_id = _uuid(thread_id, "thread_id")
        async with reader(self.engine).connect() as conn:
            row = await self._row(conn, tenant_id=tenant_id, thread_id=thread_id, run_id=run_id)
        if row is None:
            raise NotFound(f"Run '{run_id}' not found")
        return run_json(row)

    async def list_runs(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        limit: int,
        offset: int,
        status: str | None,
        timing: bool = False,
    ) -> list[JSONObject]:
        """A thread's runs, newest first; 404 if the thread is missing. `timing` adds the
        attempt count, start and end times and the error (the console shows them)."""
        thread_id = _uuid(thread_id, "thread_id")
        async with reader(self.engine).connect() as conn:
            exists = (
                await conn.execute(
                    select(threads.c.thread_id).where(
                        threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id
                    )
                )
            ).first()
            if exists is None:
                raise NotFound(f"Thread '{thread_id}' not found")
            stmt = select(runs).where(runs.c.thread_id == thread_id, runs.c.tenant_id == tenant_id)
            if status:
                stmt = stmt.where(runs.c.status == status)
            stmt = stmt.order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
            rows = (await conn.execute(stmt.limit(limit).offset(offset))).all()
        if timing:
            return [run_json(r) | run_timing(r) for r in rows]
        return [run_json(r) for r in rows]

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
        stmt = select(runs).where(runs.c.tenant_id == tenant_id)
        if run_ids is not None:
            ids = [_uuid(r, "run_id") for r in run_ids]
            stmt = stmt.where(runs.c.run_id.in_(ids), runs.c.status.in_(ACTIVE_STATUSES))
            if thread_id is not None:
                stmt = stmt.where(runs.c.thread_id == _uuid(thread_id, "thread_id"))
        else:
            wanted = ACTIVE_STATUSES if status in (None, "all") else (status,)
            stmt = stmt.where(runs.c.status.in_(wanted))
        stopping: list[str] = []
        settled: list[Row[Any]] = []
        async with self.engine.begin() as conn:
            rows = (await conn.execute(stmt.with_for_update())).all()
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
        self.hub.queue_wakeup.set()

    async def _settle_after_pending_cancel(self, conn: AsyncConnection, row: Row[Any]) -> None:
        thread = (
            await conn.execute(
                select(threads.c.interrupts, threads.c.error).where(
                    threads.c.thread_id == row.thread_id, threads.c.tenant_id == row.tenant_id
                )
            )
        ).first()
        if thread is None:
            return
        status = "error" if thread.error else ("interrupted" if thread.interrupts else "idle")
        await run_status.settle_thread(
            conn,
            tenant_id=row.tenant_id,
            thread_id=row.thread_id,
            status=status,
            error=thread.error,
        )

    async def delete(self, *, tenant_id: str, thread_id: str, run_id: str) -> None:
        """Delete a run and the checkpoints it wrote (an active run is rolled back)."""
        thread_id = _uuid(thread_id, "thread_id")
        run_id = _uuid(run_id, "run_id")
        async with self.engine.begin() as conn:
            row = await self._row(conn, tenant_id=tenant_id, thread_id=thread_id, run_id=run_id)
            if row is None:
                raise NotFound(f"Run '{run_id}' not found")
            if row.status in ACTIVE_STATUSES:
                stopping = await self._cancel_row(conn, row, action="rollback", reason="deleted")
            else:
                stopping = False
                await conn.execute(
                    delete(runs).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
                )
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
            run_id, tenant_id=tenant_id, after_seq=0 if from_start else None, fresh=from_start
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
        async with reader(self.engine).connect() as conn:
            row = (
                await conn.execute(
                    select(
                        threads.c["values"].label("state"),
                        threads.c.status,
                        threads.c.error,
                        threads.c.interrupts,
                    ).where(threads.c.thread_id == thread_id, threads.c.tenant_id == tenant_id)
                )
            ).first()
        if row is None:
            return {}
        if row.status == "error" and row.error:
            return {"__error__": row.error}
        values = (
            row.state if isinstance(row.state, dict) else ({} if row.state is None else row.state)
        )
        if row.interrupts:
            merged = [i for items in row.interrupts.values() for i in items]
            if isinstance(values, dict):
                return {**values, "__interrupt__": merged}
        return values


@dataclass(frozen=True)
class _NewRun:
    """What a run create request settled before touching the database; both create paths
    (one PostgreSQL statement, or the portable transaction) build the same rows from it."""

    principal: Principal
    payload: RunCreate
    stateless: bool
    run_id: str
    thread_id: str
    assistant_id: str
    now: datetime
    available: datetime
    strategy: str
    headers: Mapping[str, str]

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    def graph_kwargs(self, assistant: Any) -> dict[str, Any]:
        return prepare.build_kwargs(
            self.payload,
            principal=self.principal,
            run_id=self.run_id,
            thread_id=self.thread_id,
            assistant_id=self.assistant_id,
            graph_id=assistant.graph_id,
            assistant_config=assistant.config or {},
            assistant_context=assistant.context or {},
            headers=self.headers,
            temporary=self.stateless,
        )

    def thread_metadata(self, graph_id: str) -> JSONObject:
        """Metadata of a thread this run creates (stateless, or if_not_exists=create)."""
        return {
            **(((self.payload.config or {}).get("metadata")) or {}),
            **(self.payload.metadata or {}),
            "graph_id": graph_id,
            "assistant_id": self.assistant_id,
        }

    def run_row(
        self,
        assistant: Any,
        thread_metadata: JSONObject,
        kwargs: dict[str, Any],
        *,
        claimed_by: WorkerPool | None,
    ) -> dict[str, Any]:
        """The runs row; `claimed_by` a local pool: inserted already running on it."""
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "tenant_id": self.tenant_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "graph_id": assistant.graph_id,
            "status": "pending",
            "metadata": prepare.run_metadata(
                self.payload,
                assistant_metadata=assistant.metadata or {},
                thread_metadata=thread_metadata,
                assistant_id=self.assistant_id,
            ),
            "kwargs": kwargs,
            "multitask_strategy": self.strategy,
            "created_at": self.available,
            "updated_at": self.now,
            "available_at": self.available,
            "attempt": 0,
            "temporary": self.stateless,
            "worker_id": None,
            "lease_expires_at": None,
            "started_at": None,
        }
        if claimed_by is not None:
            row.update(
                status="running",
                worker_id=claimed_by.worker_id,
                lease_expires_at=self.now + timedelta(seconds=claimed_by.lease_seconds),
                attempt=1,
                started_at=self.now,
            )
        return row

    def first_attempt(self, created: Any, graph_id: str, kwargs: dict[str, Any]) -> ClaimedRun:
        """The claim of this run just inserted running (row `created`), for the local worker
        slot that takes it without a claim round trip."""
        return ClaimedRun(
            run_id=self.run_id,
            tenant_id=self.tenant_id,
            thread_id=self.thread_id,
            assistant_id=self.assistant_id,
            graph_id=graph_id,
            kwargs=kwargs,
            metadata=dict(created.metadata),
            attempt=1,
            temporary=self.stateless,
            cancel_action=None,
            created_at=created.created_at,
        )

"""Execute one claimed run: build the graph, drive `graph.astream`, publish, settle.

The run's final status, the thread's status / values / interrupts and the `__end__` stream
marker are committed in one transaction, before any reader sees the stream end. Statuses:
normal end or stop at an interrupt -> success; exception -> error; time limit -> timeout;
cancel -> interrupted (rollback deletes the run and its checkpoints); drain -> back to pending.

Every write of the attempt is fenced by its token `(run_id, attempt)` (app/runs/fencing.py):
the graph gets a fenced view of the saver, the publisher stores events only while the attempt
owns the run, and the settle is conditional on it. A refused write stops the attempt at once
(graph task cancelled, nothing published or settled) with one WARNING naming both attempts.
Every run ends: a settle that fails hands the run to its next attempt at once, and the last
allowed attempt (GRAPHKEEP_MAX_ATTEMPTS) ends it `error` with the reason (`finish.give_up`),
however the earlier attempts failed.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from dataclasses import dataclass
from typing import Any

from langgraph.errors import GraphDrained
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.auth.identity import restore_auth_user
from app.db.access import read, transaction
from app.db.storable import UnstorableValue
from app.db.types import utcnow
from app.graphs.jsonable import dumps, error_payload, to_storable
from app.runs import attempt_queries, finish, finish_queries, notify, queries, webhooks
from app.runs.chunks import ChunkTranslator, graph_input, graph_stream_modes, split_chunk
from app.runs.ending import AttemptEnding, retry_deadlock
from app.runs.events import EventHub, RunPublisher
from app.runs.fenced_saver import fenced
from app.runs.fencing import AttemptSuperseded, FencingToken, owns_run
from app.runs.protocol_runs import ThreadStreamRuns
from app.runs.queue import ClaimedRun, release
from app.runs.resume import STRICT_RESUME_KEY
from app.runs.signals import RunSignals
from app.statuses import DRAINED, ROLLBACK, RunStatus, ThreadStatus
from app.threads import run_status

log = logging.getLogger(__name__)


@dataclass
class _Outcome:
    status: RunStatus | str  # a final RunStatus, ROLLBACK or DRAINED
    error: dict[str, str] | None = None
    give_up: bool = False  # attempts exhausted: end it without reading the thread's state


class RunExecutor(AttemptEnding):
    def __init__(
        self,
        *,
        engine: AsyncEngine,
        hub: EventHub,
        graphs: Any,
        saver: Any,
        store: Any,
        run_timeout_seconds: float | None,
        max_attempts: int,
        webhook_policy: webhooks.WebhookPolicy | None = None,
    ) -> None:
        self.webhooks = webhook_policy or webhooks.WebhookPolicy()
        self.engine = engine
        self.hub = hub
        self.graphs = graphs
        self.saver = saver
        self.store = store
        self.run_timeout = run_timeout_seconds
        self.max_attempts = max_attempts
        # the thread-stream protocol: its runs' v3 driver, every run's root lifecycle
        self.thread_stream = ThreadStreamRuns(
            engine=engine, hub=hub, graphs=graphs, run_timeout=run_timeout_seconds
        )
        # PostgreSQL ends a run in one statement (app/runs/finish.py)
        self._one_statement_finish = engine.dialect.name == "postgresql"

    def _saver(self, run: ClaimedRun) -> Any:
        return self.saver.for_tenant(run.tenant_id)

    def _fenced_saver(self, run: ClaimedRun, signals: RunSignals) -> Any:
        """The saver view the graph writes through: refused once the attempt lost the run."""
        task = asyncio.current_task()
        return fenced(
            self._saver(run),
            FencingToken(run.run_id, run.attempt),
            lambda exc: signals.refused(exc.what, task),
        )

    def _store(self, run: ClaimedRun) -> Any:
        return self.store.for_tenant(run.tenant_id) if self.store is not None else None

    async def execute(self, run: ClaimedRun, signals: RunSignals, *, worker_id: str) -> None:
        """Run `run` to a final status (or hand it back when drained); never raises."""
        token = FencingToken(run.run_id, run.attempt)
        # A first attempt has no events yet; later attempts continue after the earlier ones.
        last = (
            0 if run.attempt <= 1 else await self.hub.last_seq(run.run_id, tenant_id=run.tenant_id)
        )
        # A resumable stream stores its events as they come (a client may resume it anywhere,
        # even after this process died); others only once a reader elsewhere asks for them.
        publisher = self.hub.publisher(
            run_id=run.run_id,
            thread_id=run.thread_id,
            tenant_id=run.tenant_id,
            last_seq=last,
            eager=bool(run.kwargs.get("resumable")),
            token=token,
        )
        ended = False
        thread_gone = False  # the settle deleted the temporary thread already (see _settle)
        logged = False  # the settle stored the thread stream's root terminal too
        history: int | None = None  # the thread's history length, if the settle counted it
        started = time.monotonic()
        try:
            outcome = await self._outcome(run, signals, publisher)
            if outcome is None:
                return  # abandoned: the lease expires and another worker resumes the run
            if outcome.status == DRAINED:
                metrics.count_drain(run.graph_id)
                await publisher.flush()
                async with transaction(self.engine) as conn:
                    await release(conn, run_id=run.run_id, worker_id=worker_id, attempt=run.attempt)
                    await self.hub.notify(conn, "q")
                self.hub.queue_wakeup.set()
                return
            if outcome.give_up:
                ended = await self._give_up(run, publisher, outcome.error or {}, "attempts")
            else:
                thread_gone, logged, history = await self._settle(
                    run, outcome, publisher, worker_id=worker_id
                )
                ended = True
            if ended:
                self._observe(run, outcome, time.monotonic() - started)
                status = RunStatus.ERROR if outcome.give_up else outcome.status
                await self.thread_stream.ended(run, status, outcome.error, logged=logged)
        except AttemptSuperseded as exc:
            signals.supersede(exc.what, None)
        except asyncio.CancelledError:
            if signals.superseded is not None:
                await asyncio.shield(self._warn_superseded(token, signals.superseded))
            raise
        except Exception as exc:
            log.exception("settling a run failed", extra={"run_id": run.run_id})
            ended = await self._settle_failed(run, publisher, exc, worker_id=worker_id)
            if ended:  # it gave up: the thread stream's root ends `failed` too
                await self.thread_stream.ended(run, RunStatus.ERROR, error_payload(exc))
        finally:
            publisher.close(ended=ended)
        if signals.superseded is not None:
            await self._warn_superseded(token, signals.superseded)
            return
        if ended:
            # After close: readers (wait, stream) have their answer; this is bookkeeping.
            # Only now (this attempt's settle committed) may the webhook go out.
            if not run.temporary:  # a temporary thread is about to go
                await self._observe_history(run, history)
            await self._after(run, thread_gone=thread_gone)

    def _observe(self, run: ClaimedRun, outcome: _Outcome, seconds: float) -> None:
        metrics.observe_run_finished(run.graph_id, outcome.status, seconds)
        if run.attempt > 1 and outcome.status == RunStatus.ERROR:
            # a recovered or drained run that could not finish from its last checkpoint
            metrics.count_resume_failure(run.graph_id)

    async def _observe_history(self, run: ClaimedRun, length: int | None) -> None:
        """Record the thread's history length (root checkpoints: one index-only count), as
        the settle's state read counted it (`length`), else counted now.

        The count stops one past the histogram's top bucket: a longer thread lands in +Inf
        all the same, and this runs after every run, so its cost must not grow with history.
        """
        if length is not None:
            if length:
                metrics.observe_thread_history(length)
            return
        query = queries.history_length(run.tenant_id, run.thread_id, metrics.HISTORY_COUNT_CAP)
        try:
            async with read(self.engine) as conn:
                length = int((await conn.execute(query)).scalar_one())
        except Exception:  # a metric never fails a settled run
            log.debug("history length not observed", exc_info=True)
            return
        if length:
            metrics.observe_thread_history(length)

    async def _outcome(
        self, run: ClaimedRun, signals: RunSignals, publisher: RunPublisher
    ) -> _Outcome | None:
        if run.cancel_action:
            return _Outcome(ROLLBACK if run.cancel_action == "rollback" else RunStatus.INTERRUPTED)
        if run.attempt > self.max_attempts:
            # its workers died or its settles kept failing (a failing settle hands the run on)
            err = {
                "error": "RunAttemptsExceeded",
                "message": f"run exceeded its {self.max_attempts} attempts "
                "(workers lost or ending it kept failing)",
            }
            return _Outcome(RunStatus.ERROR, err, give_up=True)
        publisher.emit("metadata", dumps({"run_id": run.run_id, "attempt": run.attempt}))
        try:
            try:
                await self.thread_stream.drive(
                    run,
                    signals.control,
                    classic=lambda: self._drive(run, signals, publisher),
                    saver=self._fenced_saver(run, signals),
                    store=self._store(run),
                    has_progress=lambda: self._has_progress(run),
                    check_lease=signals.check_lease,
                )
            finally:
                signals.settling = True
            return _Outcome(RunStatus.SUCCESS)
        except AttemptSuperseded as exc:  # a write of the graph (or of its events) was refused
            signals.supersede(exc.what, None)
            return None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if signals.abandon or task is None:
                raise
            task.uncancel()
            action = signals.cancel_action or "interrupt"
            return _Outcome(ROLLBACK if action == "rollback" else RunStatus.INTERRUPTED)
        except GraphDrained:
            return _Outcome(DRAINED)
        except TimeoutError as exc:
            err = error_payload(exc) if str(exc) else {"error": "TimeoutError", "message": ""}
            if self.run_timeout is not None and not str(exc):
                err["message"] = f"run exceeded {self.run_timeout} s"
                publisher.emit("error", dumps(err))
                return _Outcome(RunStatus.TIMEOUT, err)
            publisher.emit("error", dumps(err))
            return _Outcome(RunStatus.ERROR, err)
        except Exception as exc:
            err = error_payload(exc)
            log.info("run failed", extra={"run_id": run.run_id, "error": err["error"]})
            publisher.emit("error", dumps(err))
            return _Outcome(RunStatus.ERROR, err)

    async def _has_progress(self, run: ClaimedRun) -> bool:
        """Did an earlier attempt of this run write a checkpoint? Then resume from it."""
        config = {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
        async for _ in self._saver(run).alist(config, filter={"run_id": run.run_id}, limit=1):
            return True
        return False

    async def _drive(self, run: ClaimedRun, signals: RunSignals, publisher: RunPublisher) -> None:
        kwargs = run.kwargs
        config: dict[str, Any] = copy.deepcopy(kwargs.get("config") or {})
        # The stored user is a plain dict after JSON; re-wrap it so LangGraph fills
        # runtime.server_info.user, as on the official server.
        configurable = config["configurable"] = restore_auth_user(config.get("configurable") or {})
        if kwargs.get("strict_resume"):  # LangGraph refuses a resume no interrupt waits for
            configurable[STRICT_RESUME_KEY] = True
        graph_in = graph_input(kwargs)
        if run.attempt > 1 and await self._has_progress(run):
            # Resume where the last attempt stopped: finished nodes keep their writes.
            graph_in = None
            for key in ("checkpoint_id", "checkpoint_map"):
                configurable.pop(key, None)
        requested: list[str] = kwargs.get("stream_mode") or ["values"]
        subgraphs = bool(kwargs.get("subgraphs"))
        translator = ChunkTranslator(requested)
        context = kwargs.get("context") or None
        stream_kwargs: dict[str, Any] = {
            "context": context,
            "stream_mode": graph_stream_modes(requested),
            "subgraphs": subgraphs,
            "interrupt_before": kwargs.get("interrupt_before"),
            "interrupt_after": kwargs.get("interrupt_after"),
            "durability": kwargs.get("durability") or "async",
            "control": signals.control,
        }
        async with (
            self.graphs.open(
                run.graph_id,
                config=config,
                checkpointer=self._fenced_saver(run, signals),
                store=self._store(run),
                access_context="threads.create_run",
                context=context,
            ) as graph,
            asyncio.timeout(self.run_timeout),
        ):
            if "events" in requested:
                async for event in graph.astream_events(
                    graph_in, config, version="v2", **stream_kwargs
                ):
                    await signals.check_lease()
                    publisher.emit("events", dumps(event))
                    if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
                        item = event["data"]["chunk"]
                        ns, mode, chunk = split_chunk(item, subgraphs=subgraphs)
                        for name, data in translator.translate(ns, mode, chunk):
                            publisher.emit(name, data)
            else:
                async for item in graph.astream(graph_in, config, **stream_kwargs):
                    await signals.check_lease()
                    ns, mode, chunk = split_chunk(item, subgraphs=subgraphs)
                    for name, data in translator.translate(ns, mode, chunk):
                        publisher.emit(name, data)

    async def _thread_state(self, run: ClaimedRun) -> tuple[Any, dict[str, Any], bool, int | None]:
        """The thread's latest values, interrupts, whether it stopped with `next` set, and
        its history length (counted in the head checkpoint's read, for the metric)."""
        config: dict[str, Any] = {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
        saver = self._saver(run)
        length: int | None = None
        prefetch = getattr(saver, "aprefetch_tuple", None)
        if prefetch is not None:  # the SQL saver: the head and the count in one statement
            guard = attempt_queries.history_length_guard(
                self.engine.dialect.name, metrics.HISTORY_COUNT_CAP
            )
            saver, guarded = await prefetch(config, guard=guard)
            length = int(guarded[0]) if guarded else None
        async with self.graphs.open(
            run.graph_id,
            config=config,
            checkpointer=saver,
            store=self._store(run),
            access_context="threads.read",
        ) as graph:
            snapshot = await graph.aget_state(config)
        if not snapshot.created_at:
            return None, {}, False, length
        interrupts = {
            task.id: to_storable(list(task.interrupts), "interrupts")
            for task in snapshot.tasks
            if task.interrupts
        }
        values = to_storable(snapshot.values, "values")
        return values, interrupts, bool(snapshot.next), length

    def _ends_with_thread(self, run: ClaimedRun) -> bool:
        """A stateless run whose temporary thread goes when it ends, deleted by the run's
        final statement itself (PostgreSQL), when nothing reads the thread afterwards: no
        webhook (it reports the run row) and `values` streamed (the wait answer comes from
        the events, not from the thread's values)."""
        kwargs = run.kwargs
        return (
            self._one_statement_finish
            and run.temporary
            and kwargs.get("on_completion", "delete") == "delete"
            and not kwargs.get("webhook")
            and "values" in (kwargs.get("stream_mode") or ["values"])
        )

    async def _settle(
        self, run: ClaimedRun, outcome: _Outcome, publisher: RunPublisher, *, worker_id: str
    ) -> tuple[bool, bool, int | None]:
        """Write the run's end. Whether the temporary thread went with the run (the after-run
        bookkeeping has nothing left to delete), whether the end stored the thread stream's
        root terminal (PostgreSQL: in the settle statement, app/runs/finish.py), and the
        thread's history length if its state read counted it."""
        token = FencingToken(run.run_id, run.attempt)
        rollback = outcome.status == ROLLBACK
        if rollback:
            async with read(self.engine) as conn:
                owner = (await conn.execute(queries.owned_run(token))).first()
            if owner is None:  # a newer attempt owns the run: its checkpoints are not ours
                raise AttemptSuperseded(token, "rollback")
            await self._saver(run).adelete_for_runs([run.run_id])
        delete_thread = not rollback and self._ends_with_thread(run)
        history: int | None = None
        if delete_thread:
            # the thread goes with the run: no state to read
            values, interrupts, has_next = None, dict[str, Any](), False
        else:
            try:
                values, interrupts, has_next, history = await self._thread_state(run)
            except UnstorableValue as exc:
                # graph output storage cannot hold: the run fails with a clear error and the
                # thread's cached values are left empty rather than unreadable
                outcome = _Outcome(RunStatus.ERROR, error_payload(exc))
                publisher.emit("error", dumps(outcome.error))
                values, interrupts, has_next = None, dict[str, Any](), False
        rows = await publisher.final_rows()
        if outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT):
            thread_status = ThreadStatus.ERROR
        else:
            thread_status = ThreadStatus.INTERRUPTED if has_next else ThreadStatus.IDLE
        now = utcnow()
        if self._one_statement_finish and not rollback:
            # PostgreSQL: one statement, one round trip (app/runs/finish.py).
            origin = self.hub.origin
            end = finish.Finish(
                run_id=run.run_id,
                attempt=run.attempt,
                thread_id=run.thread_id,
                tenant_id=run.tenant_id,
                rows=rows,
                wrote_any=publisher.wrote_any,
                announce=self.hub.others_listen,
                e_payload=notify.events(run.run_id, run.thread_id, origin=origin),
                q_payload=notify.queued(origin),
                terminal=None
                if delete_thread
                else self.thread_stream.settle_terminal(run, outcome.status, outcome.error),
            )
            if delete_thread:
                await finish.delete_temporary(self.engine, end)
                return True, False, None
            settled = await retry_deadlock(
                lambda: finish.settle(
                    self.engine,
                    end,
                    status=RunStatus(outcome.status),
                    error=outcome.error,
                    thread_status=thread_status,
                    values=values,
                    interrupts=interrupts,
                    now=now,
                )
            )
            if settled == ThreadStatus.BUSY:
                self.hub.queue_wakeup.set()
            return False, True, history
        async with transaction(self.engine) as conn:
            # fenced: only while this attempt owns the run (SQLite: under the write lock)
            if rollback:
                ended = await conn.execute(queries.delete_owned_run(token, run.tenant_id))
            else:
                ended = await conn.execute(
                    finish_queries.end_run(
                        owns_run(token),
                        tenant_id=run.tenant_id,
                        status=RunStatus(outcome.status).value,
                        error=outcome.error,
                        now=now,
                    )
                )
            if not ended.rowcount:
                metrics.count_fenced_refusal("settle")
                raise AttemptSuperseded(token, "settle")
            await conn.execute(finish_queries.insert_events(), rows)
            if publisher.wrote_any:  # rows written earlier expire with the run too
                await self.hub.set_expiry(conn, run_id=run.run_id, tenant_id=run.tenant_id)
            settled = await run_status.settle_thread(
                conn,
                tenant_id=run.tenant_id,
                thread_id=run.thread_id,
                status=thread_status,
                values=values,
                interrupts=interrupts,
                error=outcome.error,
            )
            await self.hub.notify(conn, "e", run.run_id, thread_id=run.thread_id)
            if settled == ThreadStatus.BUSY:  # runs queued behind this one may start now
                await self.hub.notify(conn, "q")
        if settled == ThreadStatus.BUSY:
            self.hub.queue_wakeup.set()
        return False, False, history

    async def _after(self, run: ClaimedRun, *, thread_gone: bool = False) -> None:
        """Webhook and temporary-thread clean-up, once the run is final."""
        webhook = run.kwargs.get("webhook")
        delete_thread = (
            run.temporary
            and not thread_gone
            and run.kwargs.get("on_completion", "delete") == "delete"
        )
        if webhook:
            await webhooks.send_run_webhook(
                self.engine, self.webhooks, run_id=run.run_id, tenant_id=run.tenant_id,
                url=str(webhook),
            )  # fmt: skip
        if delete_thread:
            await self._saver(run).adelete_thread(run.thread_id)
            async with transaction(self.engine) as conn:
                await run_status.delete_thread_row(
                    conn, tenant_id=run.tenant_id, thread_id=run.thread_id
                )

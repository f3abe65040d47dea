"""Runs on the thread-stream protocol's event log (contract sections 1, 6, 10).

The executor hands every run to `ThreadStreamRuns.drive` at one place: runs created by
`run.start` / `input.respond` (marked in their configurable) execute through LangGraph's own
`graph.astream_events(version="v3")` with the graph's transformers and its module's
`stream_transformers()` hook; classic runs keep their driver and only log their root
lifecycle. `ended` logs the root terminal after the run's end is committed (the SDK reads
REST state right after it), fenced on the attempt that settled the run.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.stream import StreamTransformer
from sqlalchemy.ext.asyncio import AsyncEngine

from app.auth.identity import restore_auth_user
from app.db import sealed
from app.db.access import read, transaction
from app.runs.chunks import graph_input
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.protocol_events import Event, ProtocolNormaliser
from app.runs.queue import ClaimedRun
from app.runs.resume import STRICT_RESUME_KEY
from app.runs.threadlog import queries
from app.runs.threadlog.codec import encode_payload
from app.runs.threadlog.log import ThreadLog
from app.statuses import DRAINED, ROLLBACK, RunStatus, ThreadStatus

log = logging.getLogger(__name__)

PROTOCOL_MARKER = "__event_streaming_v2"
CANCELLED_ERROR = "cancelled"


def is_protocol_run(kwargs: dict[str, Any]) -> bool:
    configurable = (kwargs.get("config") or {}).get("configurable") or {}
    return bool(configurable.get(PROTOCOL_MARKER))


async def log_cancelled_before_start(thread_log: ThreadLog, row: Any) -> None:
    """A thread-stream run cancelled while pending (`row`: its runs row) never reaches the
    worker whose `drive` logs its root terminal, and the SDK's iterators wait for that
    terminal: it is logged here, as a cancelled run's (`failed`, "cancelled"). Called after the
    cancel's commit, as the attempt that settled the run (the fence `settled`): the append is
    its own statement, retried on a seq collision with a concurrent run's appends."""
    try:
        kwargs = sealed.open_json(row.kwargs)
    except sealed.DecryptionFailed:
        return  # unreadable here: not knowable as a thread-stream run (and it never ran)
    if not is_protocol_run(kwargs):
        return
    data = {"event": "failed", "graph_name": row.graph_id, "error": CANCELLED_ERROR}
    try:
        await thread_log.append(
            tenant_id=row.tenant_id,
            thread_id=row.thread_id,
            token=FencingToken(row.run_id, row.attempt),
            events=[("lifecycle", [], data)],
            settled=True,
        )
    except AttemptSuperseded:
        pass  # deleted meanwhile (its thread went): its log went with it


def _factories(items: list[Any]) -> list[Any]:
    """Transformer classes/factories as LangGraph takes them; bare instances wrapped."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, StreamTransformer):
            out.append(lambda _scope, inst=item: inst)
        else:
            out.append(item)
    return out


_MAX_BATCH = 500  # events in one append
# An append costs about the same server CPU whatever its size (a statement, a commit, a
# wake-up), and a token stream makes events faster than appends of a few events each can keep
# up with. Once appends follow each other back to back (a burst: the third in a row) and the
# run is well under way, the next one waits this long for the graph to add to it: at most
# this much later on the wire, several times fewer appends. A run's first events (`running`,
# the first `values`, which a client waits on) never wait, nor does anything once the run
# ended (close).
_LINGER_SECONDS = 0.005
_BURST = 2
_LINGER_AFTER = 32  # events appended before any append lingers


class _BatchWriter:
    """Appends a run's events in the order produced, as few statements as the database's
    pace allows (everything queued while one append runs goes in the next; in a burst, what
    comes during a short linger too)."""

    def __init__(self, thread_log: ThreadLog, run: ClaimedRun, token: FencingToken) -> None:
        self.thread_log = thread_log
        self.run = run
        self.token = token
        self.pending: list[Event] = []
        self.ready = asyncio.Event()
        self.closed = False
        self.error: BaseException | None = None
        self.task = asyncio.create_task(self._loop())

    def put(self, events: list[Event]) -> None:
        if self.error is not None:
            raise self.error
        if events:
            self.pending.extend(events)
            self.ready.set()

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        ended = float("-inf")  # when the last append returned
        burst = 0  # appends in a row, each started as the previous one returned
        appended = 0  # events
        try:
            while True:
                if not self.pending:
                    if self.closed:
                        return
                    await self.ready.wait()
                    self.ready.clear()
                    continue
                burst = burst + 1 if loop.time() - ended < _LINGER_SECONDS else 0
                lingers = burst >= _BURST and appended >= _LINGER_AFTER
                if lingers and not self.closed and len(self.pending) < _MAX_BATCH:
                    await asyncio.sleep(_LINGER_SECONDS)
                batch = self.pending[:_MAX_BATCH]
                self.pending = self.pending[_MAX_BATCH:]
                await self.thread_log.append(
                    tenant_id=self.run.tenant_id,
                    thread_id=self.run.thread_id,
                    token=self.token,
                    events=batch,
                )
                ended = loop.time()
                appended += len(batch)
        except Exception as exc:  # surfaced to the driver by put() / close()
            self.error = exc

    async def close(self) -> None:
        self.closed = True
        self.ready.set()
        await asyncio.shield(self.task)
        if self.error is not None:
            raise self.error


class ThreadStreamRuns:
    def __init__(
        self, *, engine: AsyncEngine, hub: EventHub, graphs: Any, run_timeout: float | None
    ) -> None:
        self.engine = engine
        self.graphs = graphs
        self.run_timeout = run_timeout
        self.log = ThreadLog(engine, hub)
        self._root_interrupted: set[str] = set()  # run ids whose root `interrupted` is logged

    async def _root(self, run: ClaimedRun, data: dict[str, Any], *, settled: bool) -> None:
        await self.log.append(
            tenant_id=run.tenant_id,
            thread_id=run.thread_id,
            token=FencingToken(run.run_id, run.attempt),
            events=[("lifecycle", [], data)],
            settled=settled,
        )

    async def _logged_before(self, run: ClaimedRun) -> bool:
        if run.attempt <= 1:
            return False
        async with read(self.engine) as conn:
            found = await conn.execute(
                queries.run_has_events(tenant_id=run.tenant_id, run_id=run.run_id)
            )
            return found.first() is not None

    @staticmethod
    async def _prepare(
        run: ClaimedRun, has_progress: Callable[[], Awaitable[bool]]
    ) -> tuple[dict[str, Any], Any, Any]:
        """The run's (config, graph input, context) from its kwargs."""
        kwargs = run.kwargs
        config: dict[str, Any] = copy.deepcopy(kwargs.get("config") or {})
        configurable = config["configurable"] = restore_auth_user(config.get("configurable") or {})
        if kwargs.get("strict_resume"):
            configurable[STRICT_RESUME_KEY] = True
        graph_in = graph_input(kwargs)
        if run.attempt > 1 and await has_progress():
            graph_in = None  # resume where the last attempt stopped
            for key in ("checkpoint_id", "checkpoint_map"):
                configurable.pop(key, None)
        return config, graph_in, kwargs.get("context") or None

    async def drive(
        self,
        run: ClaimedRun,
        control: Any,
        *,
        classic: Callable[[], Awaitable[None]],
        saver: Any,
        store: Any,
        has_progress: Callable[[], Awaitable[bool]],
        check_lease: Callable[[], Awaitable[None]],
    ) -> None:
        """Log the root `running` (once per run id), then execute the run. `saver` is the
        attempt's fenced view and `check_lease` confirms ownership between steps, as for
        classic runs."""
        if run.temporary and not is_protocol_run(run.kwargs):
            # a stateless run's thread goes with it and nobody can stream it: no log rows
            await classic()
            return
        running_data = {"event": "running", "graph_name": run.graph_id}
        if not is_protocol_run(run.kwargs):
            if not await self._logged_before(run):
                await self._root(run, running_data, settled=False)
            await classic()
            return
        # The writer exists before anything that can fail (the log check, has_progress, the
        # kwargs, the normaliser), and `running` is queued in it on every way out of the
        # check, so a run that fails before its graph starts still logs `running` ahead of
        # the `failed` its settle logs. Not awaited: the append overlaps the graph's
        # preparation; the writer keeps the order.
        writer = _BatchWriter(self.log, run, FencingToken(run.run_id, run.attempt))
        normaliser: ProtocolNormaliser | None = None
        try:
            try:
                logged = await self._logged_before(run)
            except BaseException:
                # unknown whether an earlier attempt logged it: a repeated `running` is
                # harmless, a terminal without one is not (the run fails on this error)
                writer.put([("lifecycle", [], running_data)])
                raise
            if not logged:
                writer.put([("lifecycle", [], running_data)])
            normaliser = ProtocolNormaliser(run.graph_id)
            config, graph_in, context = await self._prepare(run, has_progress)
            kwargs = run.kwargs
            async with (
                self.graphs.open(
                    run.graph_id,
                    config=config,
                    checkpointer=saver,
                    store=store,
                    access_context="threads.create_run",
                    context=context,
                ) as graph,
                asyncio.timeout(self.run_timeout),
            ):
                extra = _factories(self.graphs.stream_transformers(run.graph_id))
                stream = await graph.astream_events(
                    graph_in,
                    config,
                    version="v3",
                    transformers=extra or None,
                    context=context,
                    interrupt_before=kwargs.get("interrupt_before"),
                    interrupt_after=kwargs.get("interrupt_after"),
                    durability=kwargs.get("durability") or "async",
                    control=control,
                )
                # From the first `input.requested` on, events wait for the stream's end: with
                # durability "async" the checkpoints before the interrupt may still be in
                # flight, and a client acting on the interrupt (get_state, update_state) must
                # see them. The stream ends only once LangGraph has awaited those writes.
                held: list[Event] | None = None
                async for event in stream:
                    await check_lease()
                    events = normaliser.convert(event)
                    if held is None and any(e[0] == "input.requested" for e in events):
                        held = []
                    if held is None:
                        writer.put(events)
                    else:
                        held.extend(events)
                if held:
                    writer.put(held)
        finally:
            await writer.close()
            if normaliser is not None and normaliser.root_interrupted:
                self._root_interrupted.add(run.run_id)

    def settle_terminal(
        self, run: ClaimedRun, status: str, error: dict[str, str] | None
    ) -> tuple[str, str] | None:
        """The root terminal's encoded data for the PostgreSQL settle statement to store with
        the run's end (app/runs/finish_queries.py), saving a read and a transaction per run:
        (thread not interrupted, thread interrupted), or None when the run logs no terminal.
        The settle's statuses only (never rollback or drained); `ended(logged=True)` after."""
        if run.temporary and not is_protocol_run(run.kwargs):
            return None
        if status == RunStatus.SUCCESS:
            if run.run_id in self._root_interrupted:
                return None  # its terminal was the root `interrupted` after `input.requested`
            done = {"event": "completed", "graph_name": run.graph_id}
            return encode_payload(done), encode_payload({**done, "event": "interrupted"})
        data = self._failed(run, status, error)
        return encode_payload(data), encode_payload(data)

    @staticmethod
    def _failed(run: ClaimedRun, status: str, error: dict[str, str] | None) -> dict[str, Any]:
        if status == RunStatus.INTERRUPTED:
            # cancelled: `failed` ends SDK waiters (official `interrupted` leaves them hanging)
            return {"event": "failed", "graph_name": run.graph_id, "error": CANCELLED_ERROR}
        message = (error or {}).get("message") or (error or {}).get("error") or status
        return {"event": "failed", "graph_name": run.graph_id, "error": message}

    async def ended(
        self, run: ClaimedRun, status: str, error: dict[str, str] | None, *, logged: bool = False
    ) -> None:
        """The root terminal, once the run's final status and the thread are committed.
        `logged`: the settle stored it already (`settle_terminal`); only wake local readers."""
        interrupted = run.run_id in self._root_interrupted
        self._root_interrupted.discard(run.run_id)
        if logged:
            self.log.hub.wake_thread(run.thread_id)
            return
        if run.temporary and not is_protocol_run(run.kwargs):
            return
        if status == ROLLBACK:  # the run went: its events go with it
            async with transaction(self.engine) as conn:
                await conn.execute(
                    queries.delete_for_run(tenant_id=run.tenant_id, run_id=run.run_id)
                )
            return
        if status == DRAINED:
            return  # it resumes elsewhere, under the same run id
        if status == RunStatus.SUCCESS:
            if interrupted:
                return  # its terminal was the root `interrupted` after `input.requested`
            async with read(self.engine) as conn:
                thread_status = (
                    await conn.execute(
                        queries.thread_status(tenant_id=run.tenant_id, thread_id=run.thread_id)
                    )
                ).scalar()
            event = "interrupted" if thread_status == ThreadStatus.INTERRUPTED else "completed"
            data = {"event": event, "graph_name": run.graph_id}
        else:
            data = self._failed(run, status, error)
        try:
            await self._root(run, data, settled=True)
        except Exception:
            log.exception("logging a run's terminal failed", extra={"run_id": run.run_id})

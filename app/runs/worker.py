"""WorkerPool: claims runs and executes them with bounded concurrency; drains on shutdown.

One dispatcher loop per process claims runs while a slot is free. It sleeps on a wake-up
event (set by run creation in this process, or by a PostgreSQL NOTIFY from another process)
with a one-second fallback poll, which also picks up delayed runs (`after_seconds`) and runs
whose lease expired. Each executing run has a lease-keeper that renews the lease every third
of the lease period and notices cancels asked for in the database; a renewal refused (a newer
attempt owns the run) stops the attempt at once.

On PostgreSQL the process holds a session-level advisory lock on a connection of its own while
it runs (`queue_queries.liveness_lock`): when the process dies the server drops it, and any worker's
reaper reclaims its runs within about a second instead of a lease (app/runs/queue.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db.access import transaction
from app.db.types import utcnow
from app.logging import context_with
from app.runs import queue, queue_queries
from app.runs.events import EventHub
from app.runs.executor import RunExecutor
from app.runs.signals import RunSignals

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # fallback poll; NOTIFY / local wake-ups make claims immediate
LIVENESS_PING_SECONDS = 5.0  # how often the liveness connection is checked (reconnect if lost)


@dataclass
class _Active:
    run: queue.ClaimedRun
    signals: RunSignals
    task: asyncio.Task[None] | None = None
    keeper: asyncio.Task[None] | None = None


class WorkerPool:
    """Executes runs from the queue; `start()` then `stop()` (graceful drain)."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        hub: EventHub,
        executor: RunExecutor,
        concurrency: int,
        lease_seconds: float,
        drain_timeout_seconds: float,
        sweep_interval_seconds: float = 60.0,
    ) -> None:
        self.engine = engine
        self.hub = hub
        self.executor = executor
        self.concurrency = max(1, concurrency)
        self.lease_seconds = lease_seconds
        self.drain_timeout = drain_timeout_seconds
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._active: dict[str, _Active] = {}
        self._reserved = 0  # slots promised to runs being created in this process
        self._slot_free = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self.sweep_interval = sweep_interval_seconds
        self._last_reap = 0.0
        self._claim_failures = 0
        self._last_sweep = 0.0
        self._liveness: AsyncConnection | None = None  # PostgreSQL: holds the advisory lock
        self._liveness_checked = 0.0

    @property
    def active_runs(self) -> list[str]:
        return list(self._active)

    def start(self) -> None:
        queue.register_live_worker(self.worker_id, alive=True)
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._dispatch(), name="gk-dispatch")

    async def wait_closed(self) -> None:
        """Block until the dispatcher ends (it only ends on stop())."""
        if self._loop_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task

    # ------------------------------------------------------------------ dispatch

    async def _dispatch(self) -> None:
        while not self._stopping:
            try:
                claimed = False
                if self._free_slots() > 0 and await self._alive():
                    await self._maintain()
                    claimed = await self._claim_one()
                if self._claim_failures:
                    log.warning(
                        "claiming runs works again", extra={"failures": self._claim_failures}
                    )
                    self._claim_failures = 0
                if claimed:
                    continue
            except asyncio.CancelledError:
                raise
            except DBAPIError as exc:
                # A database outage fails every poll; say so once, then every 30th time (about
                # every 30 s), without a traceback per second.
                self._claim_failures += 1
                if self._claim_failures % 30 == 1:
                    log.warning(
                        "claiming runs failed (database unavailable?); retrying",
                        extra={"error": type(exc.orig).__name__, "failures": self._claim_failures},
                    )
            except Exception:
                log.exception("claiming runs failed; retrying")
            await self._sleep()

    async def _claim_one(self) -> bool:
        """Claim and start one run, on a slot reserved before the claim's round trip: a run
        created here meanwhile (direct dispatch, `try_reserve`) cannot take the same slot, so
        no more than `concurrency` runs ever execute at once."""
        if not self.try_reserve():
            return False
        try:
            run = await queue.claim(
                self.engine, worker_id=self.worker_id, lease_seconds=self.lease_seconds
            )
        except BaseException:
            self.unreserve()
            raise
        if run is None or self._stopping:
            self.unreserve()
            return False
        self._reserved -= 1
        self._launch(run)
        return True

    async def _sleep(self) -> None:
        self.hub.queue_wakeup.clear()
        self._slot_free.clear()
        waits = [
            asyncio.ensure_future(self.hub.queue_wakeup.wait()),
            asyncio.ensure_future(self._slot_free.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _alive(self) -> bool:
        """PostgreSQL: hold this process's liveness lock (taken once, re-taken after its
        connection was lost). Without it the reapers elsewhere would reclaim each run this
        worker claims, so it claims nothing until it holds the lock again."""
        if self.engine.dialect.name != "postgresql":
            return True
        now = time.monotonic()
        if self._liveness is not None:
            if now - self._liveness_checked < LIVENESS_PING_SECONDS:
                return True
            self._liveness_checked = now
            try:
                await self._liveness.execute(queue_queries.ping())
                return True
            except Exception:
                log.warning("worker liveness connection lost; reconnecting")
                await self._close_liveness()
        # Session-long, outside app.db.access (like the LISTEN listener): the lock lives
        # exactly as long as this connection's session.
        conn = await self.engine.connect()
        try:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(queue_queries.liveness_lock(self.worker_id))
        except BaseException:
            await conn.close()
            raise
        self._liveness, self._liveness_checked = conn, now
        return True

    async def _close_liveness(self) -> None:
        conn, self._liveness = self._liveness, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()  # never back to the pool: the lock goes with it

    async def _maintain(self) -> None:
        """Recover expired leases (at most once a second); drop expired events (per sweep)."""
        now = time.monotonic()
        if now - self._last_reap < POLL_SECONDS:
            return
        self._last_reap = now
        recovered = await queue.reap_expired(self.engine, own_worker_id=self.worker_id)
        if recovered:
            log.warning(
                "recovered runs of dead workers or expired leases", extra={"runs": recovered}
            )
        if now - self._last_sweep < self.sweep_interval:
            return
        self._last_sweep = now
        async with transaction(self.engine, one_statement=True) as conn:
            await conn.execute(queue_queries.expired_events(utcnow()))

    def _free_slots(self) -> int:
        return self.concurrency - len(self._active) - self._reserved

    def try_reserve(self) -> bool:
        """Promise a slot to a run this process is creating (direct dispatch, no claim)."""
        if self._stopping or self._free_slots() <= 0:
            return False
        self._reserved += 1
        return True

    def unreserve(self) -> None:
        self._reserved -= 1
        self._slot_free.set()

    def launch_reserved(self, run: queue.ClaimedRun) -> None:
        """Start a run that was inserted already claimed by this worker."""
        self._reserved -= 1
        metrics.observe_queue_wait(run.graph_id, 0.0)  # never queued: claimed at creation
        self._launch(run)

    # ------------------------------------------------------------------ one run

    def _launch(self, run: queue.ClaimedRun) -> None:
        active = _Active(run=run, signals=RunSignals())
        self._active[run.run_id] = active
        # the claim's lease, counted from now (the claim returned just now)
        active.signals.lease_until = time.monotonic() + self.lease_seconds * 0.9

        async def confirm() -> bool:
            return (await self._renew(active)).held

        active.signals.confirm_lease = confirm

        unregister = self.hub.on_cancel(run.run_id, lambda: self._cancel(active))
        # Every log line of the run's tasks carries its ids (app.logging ContextVars).
        ids = context_with(run_id=run.run_id, thread_id=run.thread_id, tenant_id=run.tenant_id)
        active.task = asyncio.create_task(
            self._execute(active, unregister), name="gk-run", context=ids
        )
        active.keeper = asyncio.create_task(
            self._keep_lease(active), name="gk-lease", context=ids.copy()
        )

    def _cancel(self, active: _Active) -> None:
        # The action (interrupt or rollback) is read from the run row by the keeper: a local
        # cancel only makes it renew, and so re-read the row, at once.
        if active.keeper is not None and not active.keeper.done():
            active.keeper.cancel()
        active.keeper = asyncio.create_task(self._keep_lease(active, now=True), name="gk-lease")

    async def _execute(self, active: _Active, unregister: object) -> None:
        run = active.run
        try:
            await self.executor.execute(run, active.signals, worker_id=self.worker_id)
        except asyncio.CancelledError:
            pass  # abandoned (lost lease or shutdown deadline): recovery takes it over
        except Exception:
            log.exception("run execution crashed", extra={"run_id": run.run_id})
        finally:
            if callable(unregister):
                unregister()
            if active.keeper is not None:
                active.keeper.cancel()
            was_full = self._free_slots() <= 0
            self._active.pop(run.run_id, None)
            if was_full:  # the dispatcher may be waiting for a slot
                self._slot_free.set()

    async def _keep_lease(self, active: _Active, *, now: bool = False) -> None:
        interval = max(0.2, self.lease_seconds / 3)
        run = active.run
        while True:
            if not now:
                await asyncio.sleep(interval)
            now = False
            try:
                state = await self._renew(active)
            except Exception:
                log.warning("lease renewal failed", extra={"run_id": run.run_id})
                continue
            task = active.task
            if task is None or task.done():
                return
            if not state.held:
                # the run was reclaimed (or ended elsewhere): this attempt stops now; its
                # settle, if under way, is refused by the fence all the same
                if not active.signals.settling:
                    active.signals.supersede("lease", task)
                return
            if active.signals.settling:
                continue
            if state.cancel_action and active.signals.cancel_action is None:
                active.signals.cancel_action = state.cancel_action
                task.cancel()

    async def _renew(self, active: _Active) -> queue.LeaseState:
        """Renew the lease of this attempt; on success the executor knows until when it holds
        (a little short of the lease: the renewal's own round trip, clock steps)."""
        asked = time.monotonic()
        state = await queue.renew(
            self.engine,
            run_id=active.run.run_id,
            worker_id=self.worker_id,
            lease_seconds=self.lease_seconds,
            attempt=active.run.attempt,
        )
        if state.held:
            active.signals.lease_until = asked + self.lease_seconds * 0.9
        return state

    # ------------------------------------------------------------------ shutdown

    async def stop(self) -> None:
        """Graceful drain: stop claiming, ask running graphs to stop at the next super-step
        boundary (they go back to pending), wait up to the deadline, then abandon the rest to
        lease recovery."""
        self._stopping = True
        self.hub.queue_wakeup.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        for active in list(self._active.values()):
            active.signals.control.request_drain("shutdown")
        tasks = [a.task for a in self._active.values() if a.task is not None]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self.drain_timeout)
            for active in list(self._active.values()):
                if active.task in pending:
                    active.signals.abandon = True
                    active.task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
                await self._release_abandoned()
        for active in list(self._active.values()):
            if active.keeper is not None:
                active.keeper.cancel()
        await self._close_liveness()
        queue.register_live_worker(self.worker_id, alive=False)

    async def _release_abandoned(self) -> None:
        """Runs still ours after the deadline go back to pending for another worker."""
        async with transaction(self.engine) as conn:
            for run_id, active in list(self._active.items()):
                await queue.release(
                    conn, run_id=run_id, worker_id=self.worker_id, attempt=active.run.attempt
                )
            await self.hub.notify(conn, "q")

"""Run stream events: the `EventHub` each process has, composed of small parts.

Every chunk a run produces becomes a `StreamEvent` with a per-run sequence number. The run's
publisher (app/runs/publisher.py, in the worker executing the run) appends it to a local log
that readers in the same process follow directly (app/runs/fanout.py), and writes it to
`run_events` in batches (app/runs/event_log.py). On PostgreSQL each batch commit sends a
NOTIFY (app/runs/notify.py encodes and decodes every payload), so readers in other processes,
woken by their listener (app/runs/listener.py), read the new rows. The end of a run's stream
is an internal `__end__` row written in the same transaction as the run's final status;
readers stop there and never send it.

A run's events go to the database as they come (batched) only when someone may read them
there before the run ends: the stream is resumable, or a reader in another process announced
itself (app/runs/watches.py). Otherwise they wait for the run's final transaction, which
stores them all: one write per run instead of one per batch.

The hub's jobs, each in its own part: the event log, local fan-out (run and thread
wake-ups), the listener, cancel delivery (app/runs/cancels.py) and the queue wake-up (an
event the workers wait on). The hub routes each NOTIFY to its part and reads runs' events
(`read`: local log, database, wake-ups, keep-alives).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.access import transaction
from app.db.dialect import notify_channel_sql
from app.runs import notify
from app.runs.cancels import CancelDelivery
from app.runs.event_log import END_EVENT, STATE_UPDATE_EVENT, EventLog, StreamEvent
from app.runs.fanout import LocalLog, LocalLogs, Wakeups
from app.runs.fencing import FencingToken
from app.runs.listener import Listener
from app.runs.notify import Kind, Notice
from app.runs.peers import ANNOUNCE_SECONDS, Peers
from app.runs.publisher import RunPublisher
from app.runs.threadlog.watcher import LogWatcher
from app.runs.watches import Watches

log = logging.getLogger(__name__)

__all__ = [
    "END_EVENT",
    "STATE_UPDATE_EVENT",
    "EventHub",
    "RunPublisher",
    "StreamEvent",
    "StreamInterrupted",
]


class StreamInterrupted(BaseException):
    """The process is shutting down: readers stop so the connection can be cut (the client
    reconnects to another process, with Last-Event-ID when it has one). A BaseException, so
    the API's catch-all error handler (which logs and answers 500) lets it through to the
    server, which drops the connection."""


class EventHub:
    """Per-process hub: event log, local fan-out, listener, cancel delivery, queue wake-up."""

    def __init__(
        self, engine: AsyncEngine, *, retention_seconds: float, keepalive_seconds: float = 5.0
    ) -> None:
        self.engine = engine
        self.keepalive = keepalive_seconds
        self.origin = uuid.uuid4().hex[:12]  # tells our own NOTIFYs from other processes
        self.log = EventLog(
            engine,
            retention_seconds=retention_seconds,
            origin=self.origin,
            others_listen=lambda: self.others_listen,
        )
        self.runs = Wakeups()  # readers of a run
        self.threads = Wakeups()  # readers of a thread stream
        self.local = LocalLogs(self.runs)
        self.watches = Watches(keepalive_seconds=keepalive_seconds)
        self.cancels = CancelDelivery()
        self.queue_wakeup = asyncio.Event()  # workers claim at once when set
        # Set when the process shuts down: open streams end at once (uvicorn waits for them).
        self.closing = asyncio.Event()
        self.shutdown_hooks: list[Callable[[], None]] = []
        self.cross_process = notify_channel_sql(engine.dialect) is not None  # PostgreSQL
        self.peers = Peers()  # other processes: NOTIFYs are sent only while there are some
        self.listener = Listener(engine, self._on_notice, on_connected=self._connected)
        self._announcing: set[asyncio.Task[None]] = set()
        self._presence: asyncio.Task[None] | None = None
        self._log_watcher: LogWatcher | None = None

    def log_watcher(self, interval: float) -> LogWatcher:
        """The process's one watcher of thread logs (its followers' shared backstop poll);
        made on first use, since ThreadLog objects are made per request."""
        if self._log_watcher is None:
            self._log_watcher = LogWatcher(self, interval)
        return self._log_watcher

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start listening for NOTIFY (PostgreSQL); waits until the listener is connected."""
        if self.cross_process:
            await self.listener.start()
            # the hello is out before this process serves: others notify it from then on
            await asyncio.gather(*self._announcing, return_exceptions=True)
            if self._presence is None:
                self._presence = asyncio.create_task(self._announce_forever(), name="gk-peers")

    def begin_shutdown(self) -> None:
        """SIGTERM: every open stream and wait of this process ends now (StreamInterrupted),
        so the HTTP server stops waiting for them while the workers drain."""
        self.closing.set()
        self._wake_all()
        for hook in list(self.shutdown_hooks):
            hook()

    async def stop(self) -> None:
        tasks = [t for t in (self._presence, *self._announcing) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._presence = None
        await self.listener.stop()

    def _connected(self) -> None:
        """The listener (re)connected: announce this process, and wake every waiter once
        (announcements while nobody listened were missed)."""
        self._announce_soon(Kind.HELLO)
        self._wake_all()

    def _announce_soon(self, kind: Kind) -> None:
        task = asyncio.create_task(self._announce(kind), name="gk-announce")
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def _announce(self, kind: Kind) -> None:
        try:
            async with transaction(self.engine, one_statement=True) as conn:
                await notify.send(conn, notify.encode(kind, origin=self.origin))
        except Exception as exc:  # the database may be away: the next announcement retries
            log.warning("announcing this process failed: %s", type(exc).__name__)

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_SECONDS)
            if self.listener.listening.is_set():
                await self._announce(Kind.PRESENT)

    @property
    def alone(self) -> bool:
        """Listening and no other process heard of: a NOTIFY would reach nobody."""
        return self.listener.listening.is_set() and not self.peers.any()

    @property
    def others_listen(self) -> bool:
        """Whether to send a NOTIFY at all: PostgreSQL, and another process may hear it (one
        was heard of, or this one cannot tell: its listener is down). Statements that carry
        their NOTIFY inside (the create, the settle, thread-log appends) ask this too."""
        return self.cross_process and not self.alone

    def _wake_all(self) -> None:
        """Wake every waiter once (a reconnect may have missed announcements; shutdown)."""
        self.queue_wakeup.set()
        self.runs.wake_all()
        if self._log_watcher is not None:
            self._log_watcher.changed_all()
        self.threads.wake_all()

    def _on_notice(self, notice: Notice) -> None:
        if notice.origin == self.origin:
            return  # our own announcement: this process acted on it already
        self.peers.heard(notice.origin)
        if notice.kind is Kind.HELLO:
            self._announce_soon(Kind.PRESENT)  # so the newcomer knows of this process
        elif notice.kind is Kind.PRESENT:
            pass
        elif notice.kind is Kind.QUEUED:
            self.queue_wakeup.set()
        elif notice.kind is Kind.EVENTS:
            if notice.run_id:
                self.runs.wake(notice.run_id)
            if notice.thread_id:
                self.wake_thread(notice.thread_id)
        elif notice.kind is Kind.CANCEL:
            self.cancels.deliver(notice.run_id)
        elif notice.kind is Kind.WATCH and notice.run_id:
            self.watches.watch_run(notice.run_id)
        elif notice.kind is Kind.WATCH and notice.thread_id:
            self.watches.watch_thread(notice.thread_id)

    # ------------------------------------------------------------------ signals

    def wake(self, run_id: str) -> None:
        """Wake local readers of `run_id` (new events or a status change)."""
        self.runs.wake(run_id)

    def thread_signal(self, thread_id: str) -> asyncio.Future[None]:
        """Resolved at the next `wake_thread(thread_id)`; take it before looking."""
        return self.threads.signal(thread_id)

    def wake_thread(self, thread_id: str) -> None:
        """Wake local readers of the thread stream (a run started or ended, a state update,
        another process's or the settle's events): thread-log followers read the database."""
        if self._log_watcher is not None:
            self._log_watcher.changed(thread_id)
        self.threads.wake(thread_id)

    def wake_thread_appended(self, thread_id: str) -> None:
        """Wake them for events this process just appended and handed to the log watcher's
        tail (app/runs/threadlog/watcher.py): followers take those from memory."""
        self.threads.wake(thread_id)

    @property
    def started_log_watcher(self) -> LogWatcher | None:
        """The log watcher if a follower made it (appends hand it their events)."""
        return self._log_watcher

    async def notify(
        self, conn: AsyncConnection, kind: Kind | str, run_id: str = "", *, thread_id: str = ""
    ) -> None:
        """Announce to other processes inside `conn`'s transaction (delivered on commit);
        nothing when no other process listens (app/runs/peers.py)."""
        if not self.others_listen:
            return
        await notify.send(
            conn, notify.encode(kind, run_id, origin=self.origin, thread_id=thread_id)
        )

    async def announce_reader(self, run_id: str = "", *, thread_id: str = "") -> None:
        """Tell every process that a reader here follows `run_id` from the database (or,
        with only `thread_id`, that a thread stream here waits for the thread's next run).
        PostgreSQL only: a single SQLite process has no readers elsewhere."""
        if self.others_listen:
            async with transaction(self.engine, one_statement=True) as conn:
                await self.notify(conn, Kind.WATCH, run_id, thread_id=thread_id)

    def on_cancel(self, run_id: str, handler: Callable[[], None]) -> Callable[[], None]:
        """Register the executing worker's cancel hook; returns the unregister function."""
        return self.cancels.on_cancel(run_id, handler)

    def deliver_cancel(self, run_id: str) -> None:
        """Tell a run executing in this process that a cancel was requested (no-op if not here)."""
        self.cancels.deliver(run_id)

    # ------------------------------------------------------------------ publishing

    def publisher(
        self,
        *,
        run_id: str,
        thread_id: str,
        tenant_id: str,
        last_seq: int,
        eager: bool = True,
        token: FencingToken | None = None,
    ) -> RunPublisher:
        """A publisher continuing after `last_seq` (events of earlier attempts stay).

        `eager`: store events as they come (a resumable stream); else only once a reader in
        another process announces itself, or with the run's final transaction.
        `token`: the run attempt publishing; each batch is stored only while it owns the run
        (a refused batch raises AttemptSuperseded from the next `emit` / `flush`)."""
        local = self.local.open(run_id, first_seq=last_seq + 1)
        self.wake_thread(thread_id)  # a thread stream waiting for the thread's next run
        publisher = RunPublisher(
            event_log=self.log,
            logs=self.local,
            watches=self.watches,
            local=local,
            thread_id=thread_id,
            tenant_id=tenant_id,
            eager=eager or self.watches.watched(run_id, thread_id),
            token=token,
        )
        self.watches.attach(publisher)
        return publisher

    def end_row(
        self, *, run_id: str, thread_id: str, tenant_id: str, seq: int
    ) -> dict[str, object]:
        """The `__end__` row closing a run's stream; insert it with the final status."""
        return self.log.end_row(run_id=run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq)

    async def close_stream(
        self, conn: AsyncConnection, *, run_id: str, thread_id: str, tenant_id: str
    ) -> None:
        """End the stream of a run that is not executing here (cancelled while pending, ...)."""
        seq = await self.last_seq(run_id, tenant_id=tenant_id, conn=conn) + 1
        await self.log.close_stream(
            conn, run_id=run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq
        )

    async def record_state_update(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str, data: str
    ) -> None:
        """Store a thread's `state_update` event (after update_state) in `conn`'s transaction
        and announce it; call `wake_thread` after the commit for readers in this process."""
        await self.log.record_state_update(
            conn, tenant_id=tenant_id, thread_id=thread_id, data=data
        )

    async def set_expiry(self, conn: AsyncConnection, *, run_id: str, tenant_id: str) -> None:
        """Events expire the retention period after their run ended."""
        await self.log.set_expiry(conn, run_id=run_id, tenant_id=tenant_id)

    # ------------------------------------------------------------------ reading

    async def last_seq(
        self, run_id: str, *, tenant_id: str, conn: AsyncConnection | None = None
    ) -> int:
        """The highest seq stored (or published here) for the run; 0 if none."""
        local = self.local.get(run_id)
        if local is not None and local.events:
            return local.events[-1].seq
        stored = await self.log.max_seq(run_id, tenant_id=tenant_id, conn=conn)
        return max(self.local.last_seq(run_id), stored)

    async def stored(self, run_id: str, *, tenant_id: str, after: int = 0) -> list[StreamEvent]:
        """One batch of the run's stored events after `after` (no waiting, live or not):
        the console replays a run's stream from this without holding a request open."""
        return await self.log.fetch(run_id, tenant_id=tenant_id, after=after)

    async def read(
        self,
        run_id: str,
        *,
        tenant_id: str,
        after_seq: int | None,
        heartbeat: float | None = None,
        fresh: bool = False,
        with_end: bool = False,
        live: bool = True,
    ) -> AsyncIterator[StreamEvent | None]:
        """Events of a run after `after_seq` (None: live ones only), then live until its end.

        Yields None after `heartbeat` seconds of silence (default: the hub's keep-alive
        interval) so callers can send keep-alives.
        `fresh`: the run was created just now, so nothing is stored yet; the first look at the
        database waits for a wake-up: at most a quarter of a second, or up to a heartbeat when
        the caller does not need the events as they come (`live=False`: runs/wait) and no
        other process could have taken the run before this reader looked (`alone`). A run
        queued behind this process's busy workers then costs no database reads while it
        waits: it starts here, which wakes this reader (a process that joins meanwhile and
        takes it wakes it with its end's NOTIFY).
        `with_end`: yield the internal `__end__` event (its seq) before stopping.
        Raises StreamInterrupted when the process shuts down before the run's end.
        """
        last = (
            after_seq if after_seq is not None else await self.last_seq(run_id, tenant_id=tenant_id)
        )
        heartbeat = self.keepalive if heartbeat is None else heartbeat
        announced = -heartbeat  # when this reader last asked for events as they come
        local: LocalLog | None = None
        if fresh and self.local.get(run_id) is None:
            until_woken = not live and self.alone
            try:
                await asyncio.wait_for(
                    asyncio.shield(self.runs.signal(run_id)),
                    timeout=heartbeat if until_woken else 0.25,
                )
            except TimeoutError:
                if until_woken:
                    yield None  # a heartbeat of silence: the caller's keep-alive
        while True:
            if self.closing.is_set():
                raise StreamInterrupted
            signal = self.runs.signal(run_id)  # taken before looking, so no wake-up is missed
            local = local if local is not None else self.local.get(run_id)
            if local is not None and local.events and local.first_seq > last + 1:
                batch = await self.log.fetch(
                    run_id, tenant_id=tenant_id, after=last
                )  # earlier attempts' events
                batch = [e for e in batch if e.seq < local.first_seq]
                if not batch:
                    last = local.first_seq - 1
                    continue
            elif local is not None:
                batch = local.after(last)
            else:
                batch = await self.log.fetch(run_id, tenant_id=tenant_id, after=last)
            for ev in batch:
                if ev.event == END_EVENT:
                    if with_end:
                        yield ev
                    return
                last = ev.seq
                yield ev
            if batch:
                continue
            if local is not None and local.closed:
                local = None  # the run left this process: the database has the rest
                continue
            if local is None and await self.log.run_over(run_id, tenant_id=tenant_id):
                tail = await self.log.fetch(run_id, tenant_id=tenant_id, after=last)
                for ev in tail:
                    if ev.event == END_EVENT:
                        if with_end:
                            yield ev
                        return
                    last = ev.seq
                    yield ev
                if not tail:
                    return
                continue
            if live and local is None and time.monotonic() - announced >= heartbeat:
                # executing elsewhere (or not yet): ask for its events as they come; again
                # at each heartbeat, for a process that claims the run later. A reader that
                # wants only the end (`live=False`) does not: the run's final statement stores
                # its events and wakes this process (its NOTIFY), so the run is not made to
                # store each batch as it comes for a reader that reads none of them.
                await self.announce_reader(run_id)
                announced = time.monotonic()
            try:
                await asyncio.wait_for(asyncio.shield(signal), timeout=heartbeat)
            except TimeoutError:
                yield None

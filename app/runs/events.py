"""Run stream events: the seq-numbered `run_events` log, live fan-out and cross-process wake-ups.

Every chunk a run produces becomes a `StreamEvent` with a per-run sequence number. The
publisher (in the worker executing the run) appends it to an in-memory log that readers in the
same process follow directly, and writes it to `run_events` in batches (whatever accumulated
while the previous batch was being written goes out as the next one). On PostgreSQL each batch
commit sends a NOTIFY, so readers in other processes wake and read the new rows. The end of a
run's stream is an internal `__end__` row written in the same transaction as the run's final
status; readers stop there and never send it.

NOTIFY payloads on the one channel, `<kind>:<run_id>:<origin process>[:<thread_id>]`: `q` (a
run became claimable), `e` (new events or a status change; with the thread, so readers of the
thread stream wake too), `c` (cancel requested), `w` (a reader in another process follows the
run from the database; with no run but a thread: a thread stream waits for its next run).

A run's events go to the database as they come (batched) only when someone may read them
there before the run ends: the stream is resumable, or a reader in another process announced
itself (`w`). Otherwise they wait for the run's final transaction, which stores them all: one
write per run instead of one per batch, and readers in this process follow the local log.

Thread-level `state_update` events (after update_state) are rows of `run_events` as well, under
an id of their own (seq 1); the thread stream (app/runs/thread_stream.py) merges them with the
runs of the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
from sqlalchemy import func, insert, literal, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db.dialect import notify_channel_sql, reader
from app.db.tables import run_events, runs
from app.db.types import utcnow
from app.runs.fencing import AttemptSuperseded, FencingToken, owns_run
from app.runs.queue import one_statement
from app.runs.schemas import new_run_id
from app.statuses import FINAL_RUN_STATUSES as FINAL_STATUSES

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "graphkeep"
END_EVENT = "__end__"  # internal terminal marker, never sent to clients
STATE_UPDATE_EVENT = "state_update"  # thread-level event, stored under an id of its own
_READ_BATCH = 500
LISTEN_PING_SECONDS = 5.0  # the LISTEN connection is checked this often (and this long)
_PING_SQL = str(
    select(literal(1)).compile(
        dialect=postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
)


class StreamInterrupted(BaseException):
    """The process is shutting down: readers stop so the connection can be cut (the client
    reconnects to another process, with Last-Event-ID when it has one). A BaseException, so
    the API's catch-all error handler (which logs and answers 500) lets it through to the
    server, which drops the connection."""


@dataclass(frozen=True, slots=True)
class StreamEvent:
    seq: int
    event: str
    data: str  # compact JSON, sent as is


@dataclass
class _LocalLog:
    """Events of a run executing in this process, for readers in this process."""

    first_seq: int
    events: list[StreamEvent] = field(default_factory=list)
    closed: bool = False

    def after(self, seq: int) -> list[StreamEvent]:
        start = max(0, seq + 1 - self.first_seq)
        return self.events[start:]


class EventHub:
    """Per-process hub: event logs, reader wake-ups, queue wake-up and cancel delivery."""

    def __init__(
        self, engine: AsyncEngine, *, retention_seconds: float, keepalive_seconds: float = 5.0
    ) -> None:
        self.engine = engine
        # Readers' single statements: no transaction (on SQLite, no BEGIN IMMEDIATE write
        # lock per look; a stream cut in mid-query leaves no lock behind)
        self.reads = reader(engine)
        self.retention = timedelta(seconds=retention_seconds)
        self.keepalive = keepalive_seconds
        self.origin = uuid.uuid4().hex[:12]  # tells our own NOTIFYs from other processes
        self.queue_wakeup = asyncio.Event()
        self._notify_sql = notify_channel_sql(engine.dialect)
        self._local: dict[str, _LocalLog] = {}
        self._signals: weakref.WeakValueDictionary[str, asyncio.Future[None]] = (
            weakref.WeakValueDictionary()
        )
        self._thread_signals: weakref.WeakValueDictionary[str, asyncio.Future[None]] = (
            weakref.WeakValueDictionary()
        )
        # Set when the process shuts down: open streams end at once (uvicorn waits for them).
        self.closing = asyncio.Event()
        self.shutdown_hooks: list[Callable[[], None]] = []
        self._cancel_handlers: dict[str, Callable[[], None]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        # runs followed from the database by readers elsewhere (`w`), and our publishers
        self._watched: dict[str, float] = {}
        self._watched_threads: dict[str, float] = {}  # thread streams elsewhere (`w` + thread)
        self._publishers: dict[str, RunPublisher] = {}
        # The last seq published here by an attempt that did not end the run: its events may
        # not all be stored (the settle failed, the attempt was stopped), but readers here saw
        # them, so a next attempt here continues after it and no seq a client saw is reused.
        self._seq_floor: dict[str, int] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def cross_process(self) -> bool:
        """True on PostgreSQL: other processes may publish and read."""
        return self._notify_sql is not None

    async def start(self) -> None:
        """Start listening for NOTIFY (PostgreSQL); waits until the listener is connected."""
        if self.cross_process and self._listener is None:
            self._listener = asyncio.create_task(self._listen_forever(), name="gk-listen")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._listening.wait(), timeout=10)

    def begin_shutdown(self) -> None:
        """SIGTERM: every open stream and wait of this process ends now (StreamInterrupted),
        so the HTTP server stops waiting for them while the workers drain."""
        self.closing.set()
        self._wake_all()
        for hook in list(self.shutdown_hooks):
            hook()

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    async def _listen_forever(self) -> None:
        dsn = make_url(self.engine.url).set(drivername="postgresql")
        dsn_text = dsn.render_as_string(hide_password=False)
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(dsn_text, timeout=10)
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
                self._listening.set()
                # Anything announced while we were not listening: wake everyone once.
                self._wake_all()
                await self._until_lost(conn, lost)
                log.warning("notify listener connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database may be down: retry, never die
                log.warning("notify listener failed: %s", type(exc).__name__)
            finally:
                if conn is not None and not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
            self._listening.clear()
            await asyncio.sleep(1.0)

    async def _until_lost(self, conn: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Until the connection closes, or stops answering: a server that froze (or a
        partition) closes nothing, so the listener pings and reconnects after a stall."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), timeout=LISTEN_PING_SECONDS)
                return
            try:
                await conn.fetchval(_PING_SQL, timeout=LISTEN_PING_SECONDS)
            except Exception:  # timed out or broken: reconnect
                return

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        kind, run_id, origin, thread_id = (payload.split(":", 3) + ["", "", ""])[:4]
        if origin == self.origin:
            return  # our own announcement: this process acted on it already
        if kind == "q":
            self.queue_wakeup.set()
        elif kind == "e":
            self.wake(run_id)
            if thread_id:
                self.wake_thread(thread_id)
        elif kind == "c":
            self.deliver_cancel(run_id)
        elif kind == "w":
            if run_id:
                self._watch(run_id)
            elif thread_id:
                self._watch_thread(thread_id)

    def _watch(self, run_id: str) -> None:
        """A reader in another process follows `run_id` from the database: store its events
        as they come, from now on (or from its start, if it starts here later)."""
        now = time.monotonic()
        if len(self._watched) > 1000:  # runs announced here that ran elsewhere
            self._watched = {r: t for r, t in self._watched.items() if now - t < 3600}
        self._watched[run_id] = now
        publisher = self._publishers.get(run_id)
        if publisher is not None:
            publisher.watch()

    def _watch_thread(self, thread_id: str) -> None:
        """A thread stream in another process waits for the thread's next run: runs of that
        thread starting here store their events as they come (announced each heartbeat)."""
        now = time.monotonic()
        if len(self._watched_threads) > 1000:
            self._watched_threads = {
                t: at for t, at in self._watched_threads.items() if now - at < 3 * self.keepalive
            }
        self._watched_threads[thread_id] = now
        for publisher in list(self._publishers.values()):
            if publisher.thread_id == thread_id:
                publisher.watch()

    def _thread_watched(self, thread_id: str) -> bool:
        at = self._watched_threads.get(thread_id)
        return at is not None and time.monotonic() - at < 3 * self.keepalive

    async def announce_thread_reader(self, thread_id: str) -> None:
        """Tell every process that a thread stream here waits for `thread_id`'s next run."""
        if self.cross_process:
            async with one_statement(self.engine) as conn:
                await self.notify(conn, "w", "", thread_id=thread_id)

    async def announce_reader(self, run_id: str) -> None:
        """Tell whichever process executes `run_id` that a reader here follows it from the
        database (PostgreSQL; a single SQLite process has no readers elsewhere)."""
        if self.cross_process:
            async with one_statement(self.engine) as conn:
                await self.notify(conn, "w", run_id)

    def _wake_all(self) -> None:
        self.queue_wakeup.set()
        for run_id in list(self._signals.keys()):
            self.wake(run_id)
        for thread_id in list(self._thread_signals.keys()):
            self.wake_thread(thread_id)

    # ------------------------------------------------------------------ signals

    def _signal(self, run_id: str) -> asyncio.Future[None]:
        fut = self._signals.get(run_id)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._signals[run_id] = fut
        return fut

    def wake(self, run_id: str) -> None:
        """Wake local readers of `run_id` (new events or a status change)."""
        fut = self._signals.pop(run_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def thread_signal(self, thread_id: str) -> asyncio.Future[None]:
        """Resolved at the next `wake_thread(thread_id)`; take it before looking."""
        fut = self._thread_signals.get(thread_id)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._thread_signals[thread_id] = fut
        return fut

    def wake_thread(self, thread_id: str) -> None:
        """Wake local readers of the thread stream (a run started or ended, a state update)."""
        fut = self._thread_signals.pop(thread_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def notify(
        self, conn: AsyncConnection, kind: str, run_id: str = "", *, thread_id: str = ""
    ) -> None:
        """Announce to other processes inside `conn`'s transaction (delivered on commit)."""
        if self._notify_sql is not None:
            payload = f"{kind}:{run_id}:{self.origin}"
            if thread_id:
                payload += f":{thread_id}"
            await conn.execute(
                text(self._notify_sql), {"channel": NOTIFY_CHANNEL, "payload": payload}
            )

    def on_cancel(self, run_id: str, handler: Callable[[], None]) -> Callable[[], None]:
        """Register the executing worker's cancel hook; returns the unregister function."""
        self._cancel_handlers[run_id] = handler

        def unregister() -> None:
            if self._cancel_handlers.get(run_id) is handler:
                del self._cancel_handlers[run_id]

        return unregister

    def deliver_cancel(self, run_id: str) -> None:
        """Tell a run executing in this process that a cancel was requested (no-op if not here)."""
        handler = self._cancel_handlers.get(run_id)
        if handler is not None:
            handler()

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
        local = _LocalLog(first_seq=last_seq + 1)
        self._local[run_id] = local
        self.wake_thread(thread_id)  # a thread stream waiting for the thread's next run
        publisher = RunPublisher(
            self,
            run_id=run_id,
            thread_id=thread_id,
            tenant_id=tenant_id,
            local=local,
            eager=eager or run_id in self._watched or self._thread_watched(thread_id),
            token=token,
        )
        self._publishers[run_id] = publisher
        return publisher

    def _release_local(self, run_id: str, local: _LocalLog, *, ended: bool) -> None:
        if not ended and local.events:
            if len(self._seq_floor) > 1000:  # runs handed on long ago
                self._seq_floor.clear()
            self._seq_floor[run_id] = max(self._seq_floor.get(run_id, 0), local.events[-1].seq)
        elif ended:
            self._seq_floor.pop(run_id, None)
        if ended:
            # The final status is committed: local readers may stop without asking the DB.
            last = local.events[-1].seq if local.events else local.first_seq - 1
            local.events.append(StreamEvent(last + 1, END_EVENT, "null"))
        local.closed = True
        if self._local.get(run_id) is local:
            del self._local[run_id]
        publisher = self._publishers.get(run_id)
        if publisher is not None and publisher._local is local:
            del self._publishers[run_id]
            if ended:
                self._watched.pop(run_id, None)
        self.wake(run_id)

    def end_row(self, *, run_id: str, thread_id: str, tenant_id: str, seq: int) -> dict[str, Any]:
        """The `__end__` row closing a run's stream; insert it with the final status."""
        now = utcnow()
        return {
            "run_id": run_id,
            "seq": seq,
            "thread_id": thread_id,
            "tenant_id": tenant_id,
            "event": END_EVENT,
            "data": "null",
            "created_at": now,
            "expires_at": now + self.retention,
        }

    async def close_stream(
        self, conn: AsyncConnection, *, run_id: str, thread_id: str, tenant_id: str
    ) -> None:
        """End the stream of a run that is not executing here (cancelled while pending, ...)."""
        seq = await self.last_seq(run_id, tenant_id=tenant_id, conn=conn) + 1
        await conn.execute(
            insert(run_events),
            [self.end_row(run_id=run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq)],
        )
        await self.set_expiry(conn, run_id=run_id, tenant_id=tenant_id)
        await self.notify(conn, "e", run_id, thread_id=thread_id)

    async def record_state_update(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str, data: str
    ) -> None:
        """Store a thread's `state_update` event (after update_state) in `conn`'s transaction
        and announce it; call `wake_thread` after the commit for readers in this process."""
        now = utcnow()
        event_id = new_run_id()
        await conn.execute(
            insert(run_events),
            [
                {
                    "run_id": event_id,
                    "seq": 1,
                    "thread_id": thread_id,
                    "tenant_id": tenant_id,
                    "event": STATE_UPDATE_EVENT,
                    "data": data,
                    "created_at": now,
                    "expires_at": now + self.retention,
                }
            ],
        )
        await self.notify(conn, "e", event_id, thread_id=thread_id)

    async def set_expiry(self, conn: AsyncConnection, *, run_id: str, tenant_id: str) -> None:
        """Events expire `retention` after their run ended."""
        await conn.execute(
            run_events.update()
            .where(run_events.c.run_id == run_id, run_events.c.tenant_id == tenant_id)
            .where(run_events.c.expires_at.is_(None))
            .values(expires_at=utcnow() + self.retention)
        )

    # ------------------------------------------------------------------ reading

    async def last_seq(
        self, run_id: str, *, tenant_id: str, conn: AsyncConnection | None = None
    ) -> int:
        """The highest seq stored (or published here) for the run; 0 if none."""
        local = self._local.get(run_id)
        if local is not None and local.events:
            return local.events[-1].seq
        floor = self._seq_floor.get(run_id, 0)
        stmt = select(func.max(run_events.c.seq)).where(
            run_events.c.run_id == run_id, run_events.c.tenant_id == tenant_id
        )
        if conn is not None:
            value = (await conn.execute(stmt)).scalar()
        else:
            async with self.reads.connect() as own:
                value = (await own.execute(stmt)).scalar()
        return max(floor, int(value or 0))

    async def stored(self, run_id: str, *, tenant_id: str, after: int = 0) -> list[StreamEvent]:
        """One batch of the run's stored events after `after` (no waiting, live or not):
        the console replays a run's stream from this without holding a request open."""
        return await self._fetch(run_id, tenant_id, after)

    async def _fetch(self, run_id: str, tenant_id: str, after: int) -> list[StreamEvent]:
        async with self.reads.connect() as conn:
            rows = await conn.execute(
                select(run_events.c.seq, run_events.c.event, run_events.c.data)
                .where(
                    run_events.c.run_id == run_id,
                    run_events.c.tenant_id == tenant_id,
                    run_events.c.seq > after,
                )
                .order_by(run_events.c.seq)
                .limit(_READ_BATCH)
            )
            return [StreamEvent(r.seq, r.event, r.data) for r in rows]

    async def _run_over(self, run_id: str, tenant_id: str) -> bool:
        async with self.reads.connect() as conn:
            status = (
                await conn.execute(
                    select(runs.c.status).where(
                        runs.c.run_id == run_id, runs.c.tenant_id == tenant_id
                    )
                )
            ).scalar()
        return status is None or status in FINAL_STATUSES

    async def read(
        self,
        run_id: str,
        *,
        tenant_id: str,
        after_seq: int | None,
        heartbeat: float | None = None,
        fresh: bool = False,
        with_end: bool = False,
    ) -> AsyncIterator[StreamEvent | None]:
        """Events of a run after `after_seq` (None: live ones only), then live until its end.

        Yields None after `heartbeat` seconds of silence (default: the hub's keep-alive
        interval) so callers can send keep-alives.
        `fresh`: the run was created just now, so nothing is stored yet; the first look at the
        database waits for a wake-up (at most a quarter of a second).
        `with_end`: yield the internal `__end__` event (its seq) before stopping.
        Raises StreamInterrupted when the process shuts down before the run's end.
        """
        last = (
            after_seq if after_seq is not None else await self.last_seq(run_id, tenant_id=tenant_id)
        )
        heartbeat = self.keepalive if heartbeat is None else heartbeat
        announced = -heartbeat  # when this reader last asked for events as they come
        local: _LocalLog | None = None
        if fresh and run_id not in self._local:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._signal(run_id)), timeout=0.25)
        while True:
            if self.closing.is_set():
                raise StreamInterrupted
            signal = self._signal(run_id)  # taken before looking, so no wake-up is missed
            local = local if local is not None else self._local.get(run_id)
            if local is not None and local.events and local.first_seq > last + 1:
                batch = await self._fetch(run_id, tenant_id, last)  # earlier attempts' events
                batch = [e for e in batch if e.seq < local.first_seq]
                if not batch:
                    last = local.first_seq - 1
                    continue
            elif local is not None:
                batch = local.after(last)
            else:
                batch = await self._fetch(run_id, tenant_id, last)
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
            if local is None and await self._run_over(run_id, tenant_id):
                tail = await self._fetch(run_id, tenant_id, last)
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
            if local is None and time.monotonic() - announced >= heartbeat:
                # executing elsewhere (or not yet): ask for its events as they come; again
                # at each heartbeat, for a process that claims the run later
                await self.announce_reader(run_id)
                announced = time.monotonic()
            try:
                await asyncio.wait_for(asyncio.shield(signal), timeout=heartbeat)
            except TimeoutError:
                yield None


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    return lambda _conn: event.set()


class RunPublisher:
    """Appends one run's events: live to local readers at once, to `run_events` in batches.

    Database writes wait `COALESCE_SECONDS` so events produced together go in one INSERT; the
    events still pending when the run ends are written by the settling transaction itself
    (`final_rows`), so a short run costs no separate event write at all. Until the publisher
    is `eager` (resumable stream) or watched (a reader elsewhere, see EventHub), no batch is
    written before the end: the final transaction stores them all.
    """

    COALESCE_SECONDS = 0.02

    def __init__(
        self,
        hub: EventHub,
        *,
        run_id: str,
        thread_id: str,
        tenant_id: str,
        local: _LocalLog,
        eager: bool = True,
        token: FencingToken | None = None,
    ) -> None:
        self.hub = hub
        self.token = token
        self._eager = eager
        self.run_id = run_id
        self.thread_id = thread_id
        self.tenant_id = tenant_id
        self._local = local
        self._seq = local.first_seq - 1
        self._pending: list[dict[str, Any]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writing = False
        self._final = False
        self._failure: BaseException | None = None
        self.wrote_any = False  # some rows were stored before the final transaction

    @property
    def last_seq(self) -> int:
        return self._seq

    def _row(self, seq: int, event: str, data: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": seq,
            "thread_id": self.thread_id,
            "tenant_id": self.tenant_id,
            "event": event,
            "data": data,
            "created_at": utcnow(),
            "expires_at": None,
        }

    def emit(self, event: str, data: str) -> StreamEvent:
        """Publish one event (data is compact JSON text)."""
        if self._failure is not None:
            raise self._failure
        self._seq += 1
        ev = StreamEvent(self._seq, event, data)
        self._local.events.append(ev)
        self.hub.wake(self.run_id)
        self._pending.append(self._row(ev.seq, event, data))
        if self._eager and not self._final and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._write_batches(), name="gk-events")
        return ev

    def stored_elsewhere(self, seq: int, event: str, data: str) -> None:
        """An event the run's end stored itself (finish.give_up): readers here see it too,
        before the end marker."""
        self._seq = max(self._seq, seq)
        self._local.events.append(StreamEvent(seq, event, data))
        self.hub.wake(self.run_id)

    def watch(self) -> None:
        """A reader elsewhere follows the run: store what is pending now, then every batch."""
        if self._eager:
            return
        self._eager = True
        if self._pending and not self._final and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._write_batches(delay=0), name="gk-events")

    async def _write_batches(self, delay: float | None = None) -> None:
        while self._pending and not self._final:
            await asyncio.sleep(self.COALESCE_SECONDS if delay is None else delay)
            if self._final or not self._pending:
                return
            batch, self._pending = self._pending, []
            self._writing = True
            try:
                await self._store(batch)
                self.wrote_any = True
            except AttemptSuperseded as exc:
                self._failure = exc  # a newer attempt owns the run: this one stops
                return
            except Exception as exc:
                self._failure = exc
                log.error("writing run events failed", extra={"run_id": self.run_id})
                return
            finally:
                self._writing = False

    async def _store(self, batch: list[dict[str, Any]]) -> None:
        """One batch of rows and its NOTIFY; fenced when the publisher has a token."""
        token = self.token
        if token is None:
            # Autocommit on PostgreSQL: the NOTIFY commits after the rows it announces.
            async with one_statement(self.hub.engine) as conn:
                await conn.execute(insert(run_events), batch)
                await self.hub.notify(conn, "e", self.run_id, thread_id=self.thread_id)
            return
        async with self.hub.engine.begin() as conn:
            # The owner row share-locked (PostgreSQL; SQLite holds its write lock): a reaper
            # or a newer attempt's claim waits for this commit, or this sees them and stops.
            owner = (
                await conn.execute(
                    select(runs.c.run_id).where(owns_run(token)).with_for_update(read=True)
                )
            ).first()
            if owner is None:
                metrics.count_fenced_refusal("events")
                raise AttemptSuperseded(token, "events")
            await conn.execute(insert(run_events), batch)
            await self.hub.notify(conn, "e", self.run_id, thread_id=self.thread_id)

    async def _stop_writer(self) -> None:
        writer = self._writer
        if writer is None or writer.done():
            return
        if self._writing:
            await asyncio.shield(writer)  # a batch is in flight: let it commit
        else:
            writer.cancel()  # only sleeping: the rows stay pending
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    async def flush(self) -> None:
        """Store every emitted event now; raises if storing failed."""
        await self._stop_writer()
        if self._pending and not self._final:
            self._writer = asyncio.create_task(self._write_batches(delay=0), name="gk-events")
            await asyncio.shield(self._writer)
        if self._failure is not None:
            raise self._failure

    async def final_rows(self) -> list[dict[str, Any]]:
        """Every event not stored yet plus the `__end__` row, with their expiry set: insert
        them in the transaction that sets the run's final status."""
        self._final = True
        await self._stop_writer()
        if self._failure is not None:
            raise self._failure
        rows, self._pending = self._pending, []
        self._seq += 1
        end = self.hub.end_row(
            run_id=self.run_id, thread_id=self.thread_id, tenant_id=self.tenant_id, seq=self._seq
        )
        for row in rows:
            row["expires_at"] = end["expires_at"]
        return [*rows, end]

    def close(self, *, ended: bool = False) -> None:
        """Call after the final transaction committed (`ended`) or the run was handed back."""
        self.hub._release_local(self.run_id, self._local, ended=ended)

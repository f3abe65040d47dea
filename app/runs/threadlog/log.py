"""Appending to and reading the per-thread event log.

Writers are run attempts: `append` is fenced by the attempt's token (app/runs/fencing.py),
allocates seqs in the inserting statement and wakes this process's readers and, through the
hub's NOTIFY, the other processes'. Readers poll `seq > cursor` on a wake-up, or every
`poll_seconds` as a backstop (a replica whose NOTIFY listener is reconnecting).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction
from app.db.types import utc_from_raw, utcnow
from app.runs import notify
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.threadlog import queries
from app.runs.threadlog.codec import decode_payload, plain_payload, seal_payload
from app.runs.threadlog.watcher import Tail, Watch

log = logging.getLogger(__name__)

_SEQ_RETRIES = 8  # concurrent writers of one thread (multitask interrupt) collide on seq
_READ_BATCH = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LogReadFailed(Exception):
    """Reading the log failed on the server (database down, pool exhausted): the stream
    ends with the protocol's error frame instead of a cut connection."""

    def __init__(self, cursor: int) -> None:
        super().__init__(f"reading the thread's events failed after seq {cursor}; reconnect")
        self.cursor = cursor

    def envelope(self) -> dict[str, Any]:
        return {"type": "error", "id": None, "error": "unknown_error", "message": str(self)}


class ResumeGap(Exception):
    """The cursor is older than what the log keeps: events after it were trimmed."""

    def __init__(self, since: int, min_available_seq: int) -> None:
        super().__init__(f"events after seq {since} are no longer retained")
        self.since = since
        self.min_available_seq = min_available_seq

    def envelope(self, command_id: int | None = None) -> dict[str, Any]:
        """The protocol's `resume_gap` error (contract section 3)."""
        return {
            "type": "error",
            "id": command_id,
            "error": "resume_gap",
            "message": str(self),
            "since": self.since,
            "min_available_seq": self.min_available_seq,
        }


def gap_after(since: int, event: LogEvent) -> ResumeGap | None:
    """A tombstone read after cursor `since`: events between were trimmed. `since` 0 (or
    none) asks for whatever is retained, so it never has a gap."""
    if event.method != queries.TRIMMED or since <= 0 or since >= event.seq:
        return None
    return ResumeGap(since, event.seq + 1)


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:|")


def _json_str(value: str) -> str:
    """`value` as a JSON string. Event ids are digits and methods channel names, which need
    no escaping: quoting them directly instead of `json.dumps` is a tenth of the cost per
    event of a replay; anything else still goes through `json.dumps`."""
    if _PLAIN.issuperset(value):
        return f'"{value}"'
    return json.dumps(value)


@functools.lru_cache(maxsize=256)
def _quoted_method(method: str) -> str:
    """`_json_str(method)`, remembered: a log holds a few distinct methods (channel names),
    so a replay quotes each once instead of once per event."""
    return _json_str(method)


class LogEvent(NamedTuple):
    """One event as read from the log. A named tuple, not a frozen dataclass: a replay
    makes one per row, and a frozen dataclass's `__init__` (one `object.__setattr__` per
    field) cost more than the rest of turning a row into an event."""

    seq: int
    event_id: str
    method: str
    namespace_json: str  # compact JSON list, as stored (spliced into the envelope as is)
    data: str  # compact JSON text
    timestamp: int  # ms since the epoch

    @property
    def namespace(self) -> list[str]:
        value = json.loads(self.namespace_json)
        return value if isinstance(value, list) else []

    def envelope(self) -> str:
        """The protocol's event envelope as compact JSON. Every part is JSON already (ids
        and methods are written by this module), so it is spliced, never re-encoded: replay
        of a long log is mostly this line. An event id is the seq's digits (the append
        writes it so), quoted as is; anything else goes through `_json_str`."""
        seq, event_id, method, namespace_json, data, timestamp = self
        quoted_id = f'"{event_id}"' if event_id.isdigit() and event_id.isascii() else None
        return (
            f'{{"type":"event","event_id":{quoted_id or _json_str(event_id)},"seq":{seq},'
            f'"method":{_quoted_method(method)},"params":{{"namespace":{namespace_json},'
            f'"timestamp":{timestamp},"data":{data}}}}}'
        )

    def data_name(self) -> str | None:
        """`data.name` of a custom event (named channels), else None."""
        if '"name"' not in self.data:
            return None
        try:
            value = json.loads(self.data)
        except ValueError:
            return None
        name = value.get("name") if isinstance(value, dict) else None
        return name if isinstance(name, str) and name else None


def _rows(events: Sequence[tuple[str, Sequence[str], Any]]) -> list[tuple[str, str, str]]:
    """`(method, namespace JSON, data JSON)` as delivered (sealed only for storage)."""
    return [
        (method, json.dumps(list(ns), separators=(",", ":")), plain_payload(data))
        for method, ns, data in events
    ]


async def _retrying_seq(write: Callable[[], Awaitable[None]]) -> None:
    """Run `write` again on a seq collision (two writers took the same next seq; the unique
    index refused one, which wrote nothing), with a short growing pause."""
    for retry in range(_SEQ_RETRIES):
        try:
            await write()
            return
        except IntegrityError:
            if retry == _SEQ_RETRIES - 1:
                raise
            await asyncio.sleep(0.002 * (retry + 1))


def _events(rows: Sequence[Sequence[Any]]) -> list[LogEvent]:
    """Stored rows `(seq, event_id, method, namespace, data, created_at)` as events. A
    replay turns thousands of rows into frames, so this is kept lean: rows are unpacked as
    tuples (not read by name), each event is built by `tuple.__new__` (no per-field
    `__init__`), and the timestamp is computed once per distinct raw `created_at` (an
    append batch shares one; see queries.read_after)."""
    stamps: dict[datetime | str, int] = {}
    out: list[LogEvent] = []
    append = out.append
    new = tuple.__new__
    decode = decode_payload
    for seq, event_id, method, namespace, data, created_at in rows:
        stamp = stamps.get(created_at)
        if stamp is None:
            moment = utc_from_raw(created_at)
            stamp = stamps[created_at] = int((moment - _EPOCH).total_seconds() * 1000)
        append(new(LogEvent, (seq, event_id, method, namespace, decode(data), stamp)))
    return out


class ThreadLog:
    def __init__(self, engine: AsyncEngine, hub: EventHub, *, poll_seconds: float = 1.0) -> None:
        self.engine = engine
        self.hub = hub
        self.poll_seconds = poll_seconds

    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        token: FencingToken,
        events: Sequence[tuple[str, Sequence[str], Any]],
        settled: bool = False,
    ) -> None:
        """Append `(method, namespace, data)` events; AttemptSuperseded when the attempt no
        longer owns its run (nothing was written). ONE autocommitted statement with its NOTIFY
        inside on PostgreSQL (no BEGIN / COMMIT round trips); retried on a seq collision."""
        if not events:
            return
        dialect = self.engine.dialect.name
        rows = _rows(events)
        now = utcnow()
        params = queries.append_params(
            dialect,
            tenant_id=tenant_id,
            thread_id=thread_id,
            token=token,
            rows=[(method, ns, seal_payload(data)) for method, ns, data in rows],
            now=now,
        )
        announce = self.hub.others_listen
        if announce:
            params[queries.A_CHANNEL] = notify.NOTIFY_CHANNEL
            params[queries.A_PAYLOAD] = notify.thread_events(thread_id, origin=self.hub.origin)

        last = 0

        async def write() -> None:
            nonlocal last
            async with transaction(self.engine, one_statement=True) as conn:
                if announce:
                    query = queries.append_announced(settled=settled)
                    row = (await conn.execute(query, params)).one()
                    written, top = row.written, row.last
                else:
                    statement = queries.append_events(dialect, settled=settled)
                    seqs = (await conn.execute(statement, params)).scalars().all()
                    written, top = len(seqs), max(seqs, default=0)
                if not written:
                    raise AttemptSuperseded(token, "thread log append")
                last = int(top)

        await _retrying_seq(write)
        # committed: this process's followers of the thread take the events from memory
        # (seqs `last - n + 1 .. last`, as the statement numbered them; ids are the seqs)
        watcher = self.hub.started_log_watcher
        if watcher is not None:
            stamp = int((now - _EPOCH).total_seconds() * 1000)
            first = last - len(rows) + 1
            watcher.appended(
                tenant_id,
                thread_id,
                [
                    LogEvent(first + i, str(first + i), method, ns, data, stamp)
                    for i, (method, ns, data) in enumerate(rows)
                ],
            )
        self.hub.wake_thread_appended(thread_id)

    async def check_cursor(self, *, tenant_id: str, thread_id: str, since: int | None) -> None:
        """ResumeGap when events after `since` were trimmed (one indexed row read)."""
        if not since:
            return
        async with read(self.engine) as conn:
            row = (
                await conn.execute(queries.oldest_row(tenant_id=tenant_id, thread_id=thread_id))
            ).first()
        if row is not None and row.method == queries.TRIMMED and since < int(row.seq):
            raise ResumeGap(since, int(row.seq) + 1)

    async def read_after(self, *, tenant_id: str, thread_id: str, since: int) -> list[LogEvent]:
        async with read(self.engine) as conn:
            result = await conn.execute(
                queries.read_after(
                    tenant_id=tenant_id, thread_id=thread_id, since=since, limit=_READ_BATCH
                )
            )
            rows = result.all()
        return _events(rows)

    async def read_between(
        self, *, tenant_id: str, thread_id: str, after: int, upto: int
    ) -> list[LogEvent]:
        """The events with `after < seq <= upto`, oldest first, tombstones left out."""
        found: list[LogEvent] = []
        while after < upto:
            batch = await self.read_after(tenant_id=tenant_id, thread_id=thread_id, since=after)
            if not batch:
                break
            found += [e for e in batch if e.seq <= upto and e.method != queries.TRIMMED]
            after = batch[-1].seq
        return found

    async def follow(
        self, *, tenant_id: str, thread_id: str, since: int, heartbeat: float
    ) -> AsyncIterator[list[LogEvent]]:
        """Batches of events with `seq > since`, then live ones, forever; an empty batch
        every `heartbeat` seconds of silence. Ends when the process shuts down; raises
        ResumeGap when the log was trimmed past the cursor (at the start or, for a reader
        that fell behind a trim, later), LogReadFailed when a read fails (the caller ends
        the stream with an error frame). Tombstones are never yielded."""
        # The backstop for a missed wake-up is the process's shared watcher (one poll per
        # thread, not per follower): rare where NOTIFY carries other processes' appends
        # (PostgreSQL), every poll_seconds where it cannot. Heartbeats keep their own clock.
        backstop = self.poll_seconds * (5 if self.hub.cross_process else 1)
        watcher = self.hub.log_watcher(backstop)
        watch = watcher.watch(tenant_id, thread_id, since)
        try:
            tail = watcher.tail(tenant_id, thread_id)
            async for batch in self._follow(tenant_id, thread_id, watch, tail, heartbeat):
                yield batch
        finally:
            watcher.unwatch(tenant_id, thread_id, watch)

    async def _follow(
        self, tenant_id: str, thread_id: str, watch: Watch, tail: Tail, heartbeat: float
    ) -> AsyncIterator[list[LogEvent]]:
        cursor = watch.cursor
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + heartbeat
        read = True
        # This process's appends come from the watcher's tail (app/runs/threadlog/watcher.py)
        # while the tail vouches for them: the database was read up to its end (an empty
        # read) since the tail's generation `seen`, and the tail reaches back to the cursor.
        seen = -1
        while not self.hub.closing.is_set():
            signal = self.hub.thread_signal(thread_id)  # before reading: no lost wake-up
            if read:
                gen = tail.gen  # before reading: a change during the read is seen next time
                batch = tail.after(cursor) if gen == seen else None
                if batch is None:
                    try:
                        batch = await self.read_after(
                            tenant_id=tenant_id, thread_id=thread_id, since=cursor
                        )
                    except (SQLAlchemyError, OSError, TimeoutError) as exc:
                        log.warning("thread log read failed: %s", type(exc).__name__)
                        raise LogReadFailed(cursor) from exc
                    # only a read that found nothing more lets the tail vouch from here on
                    seen = -1 if batch else gen
                if batch and batch[0].method == queries.TRIMMED:  # only ever the oldest row
                    gap = gap_after(cursor, batch[0])
                    if gap is not None:
                        raise gap
                    cursor = watch.cursor = batch[0].seq
                    batch = batch[1:]
                if batch:
                    cursor = watch.cursor = batch[-1].seq
                    next_beat = loop.time() + heartbeat
                    yield batch
                    continue
            now = loop.time()
            if now >= next_beat:
                next_beat = now + heartbeat
                yield []
            try:
                await asyncio.wait_for(
                    asyncio.shield(signal), timeout=max(next_beat - loop.time(), 0.01)
                )
                read = True
            except TimeoutError:
                read = False

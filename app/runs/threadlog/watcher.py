"""One backstop poll per watched thread per process, shared by all its followers.

Followers of the thread log wake on `hub.wake_thread` (this process's appends, and other
processes' through NOTIFY). The poll is the safety net for a wake-up that never came (a
replica whose listener is reconnecting, SQLite where nothing crosses processes). Polling per
follower made 1,000 idle subscribers 1,000 reads per interval, enough to exhaust the pool; so
one task per process reads the last seq of every watched thread in a few grouped statements
and wakes a thread's followers when one of them is behind it.

Why comparing with the followers' own cursors is enough: a follower takes its signal before
its read and sets its cursor from what that read returned, so an append after that read has a
seq above the cursor and the first poll that sees it wakes the follower. A poll that read
before the follower's read can only wake it in vain (one extra read). Comparing with the
cursors, rather than with the last seq the previous poll saw, also keeps a poll from waking
every newly watched thread's followers at once (1,000 new idle subscribers were 1,000 reads
in one burst through a small pool, and their heartbeats came late).

The watcher also keeps, per watched thread, a `Tail`: the events this process appended last,
handed over after their append committed, so the thread's followers here take them from
memory instead of reading them back (a streaming run is one append and a wake-up per few
events; a re-read per follower per wake-up was a third of the server's work). Followers
read the database whenever the tail cannot vouch for what follows their cursor: on any other
wake-up (another process's or the settle's events, the poll, a reconnect: `changed` bumps the
tail's generation), when the tail does not reach back to their cursor, and until a database
read came back empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from app.db.access import read
from app.runs.threadlog import queries

if TYPE_CHECKING:
    from app.runs.events import EventHub
    from app.runs.threadlog.log import LogEvent

log = logging.getLogger(__name__)

_CHUNK = 500  # thread ids per statement (bound parameters stay far below every limit)
# what a tail keeps at most (a follower further behind reads the database): events, and
# bytes of their data (a `values` event carries the whole state)
_TAIL = 4096
_TAIL_BYTES = 4 << 20
_Key = tuple[str, str]  # (tenant_id, thread_id)


class Tail:
    """The events last appended here to one thread: consecutive seqs, committed, in order.
    `gen` moves on every wake-up that may stand for events not in it."""

    __slots__ = ("events", "gen", "size")

    def __init__(self) -> None:
        self.events: list[LogEvent] = []
        self.gen = 0
        self.size = 0  # characters of the held events' data

    def add(self, events: list[LogEvent]) -> None:
        held = self.events
        if held and events[0].seq != held[-1].seq + 1:
            # not next to what is held (appends of two writers committed out of order, or a
            # rolled-back run's seqs taken again): start over, and let followers read
            self.gen += 1
            held.clear()
            self.size = 0
        held.extend(events)
        size = self.size + sum(len(e.data) for e in events)
        # the oldest go first; the newest always stays, so the tail is never empty after an
        # append (an empty tail says "nothing new", a tail above the cursor says "read")
        drop = 0
        while drop < len(held) - 1 and (len(held) - drop > _TAIL or size > _TAIL_BYTES):
            size -= len(held[drop].data)
            drop += 1
        if drop:
            del held[:drop]
        self.size = size

    def after(self, cursor: int) -> list[LogEvent] | None:
        """The events after `cursor`, or None when the tail does not reach back to it."""
        held = self.events
        if not held or held[-1].seq <= cursor:
            return []
        start = cursor + 1 - held[0].seq
        return None if start < 0 else held[start:]


class Watch:
    """One follower's registration; the follower keeps `cursor` at the last seq it read."""

    __slots__ = ("cursor",)

    def __init__(self, cursor: int) -> None:
        self.cursor = cursor


class LogWatcher:
    def __init__(self, hub: EventHub, interval: float) -> None:
        self.hub = hub
        self.interval = interval
        self._watches: dict[_Key, set[Watch]] = {}
        self._tails: dict[str, dict[str, Tail]] = {}  # thread_id -> tenant_id -> tail
        self._task: asyncio.Task[None] | None = None
        self.polls = 0  # statements run (tests and benches read it)

    def watch(self, tenant_id: str, thread_id: str, cursor: int) -> Watch:
        handle = Watch(cursor)
        self._watches.setdefault((tenant_id, thread_id), set()).add(handle)
        self._tails.setdefault(thread_id, {}).setdefault(tenant_id, Tail())
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="gk-threadlog-watch")
        return handle

    def unwatch(self, tenant_id: str, thread_id: str, handle: Watch) -> None:
        key = (tenant_id, thread_id)
        handles = self._watches.get(key)
        if handles is None:
            return
        handles.discard(handle)
        if not handles:
            del self._watches[key]
            tails = self._tails.get(thread_id)
            if tails is not None:
                tails.pop(tenant_id, None)
                if not tails:
                    del self._tails[thread_id]
        # nothing left to watch: the task ends at its next wake-up on its own (never
        # cancelled, which could interrupt a read in the middle of its statement)

    def tail(self, tenant_id: str, thread_id: str) -> Tail:
        """The thread's tail; exists while the thread is watched (call after `watch`)."""
        return self._tails[thread_id][tenant_id]

    def appended(self, tenant_id: str, thread_id: str, events: list[LogEvent]) -> None:
        """Events this process appended, after their append committed: kept for the
        thread's followers if it has any here."""
        tail = self._tails.get(thread_id, {}).get(tenant_id)
        if tail is not None and events:
            tail.add(events)

    def changed(self, thread_id: str) -> None:
        """A wake-up not from `appended`: the thread's followers read the database."""
        for tail in self._tails.get(thread_id, {}).values():
            tail.gen += 1

    def changed_all(self) -> None:
        for tails in self._tails.values():
            for tail in tails.values():
                tail.gen += 1

    @property
    def watched(self) -> int:
        return len(self._watches)

    async def _run(self) -> None:
        while self._watches and not self.hub.closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.hub.closing.wait(), timeout=self.interval)
            if self.hub.closing.is_set() or not self._watches:
                return
            try:
                await self.poll()
            except Exception:  # the next poll retries; followers keep their own reads
                log.warning("thread log watcher poll failed", exc_info=False)

    async def poll(self) -> None:
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant_id, thread_id in list(self._watches):
            by_tenant[tenant_id].append(thread_id)
        for tenant_id, thread_ids in by_tenant.items():
            for start in range(0, len(thread_ids), _CHUNK):
                chunk = thread_ids[start : start + _CHUNK]
                statement = queries.last_seqs(tenant_id=tenant_id, thread_ids=chunk)
                async with read(self.hub.engine) as conn:
                    rows = {r.thread_id: int(r.last) for r in await conn.execute(statement)}
                self.polls += 1
                for thread_id in chunk:
                    handles = self._watches.get((tenant_id, thread_id))
                    if not handles:
                        continue  # left while we read
                    last = rows.get(thread_id, 0)
                    if any(h.cursor < last for h in handles):
                        self.hub.wake_thread(thread_id)

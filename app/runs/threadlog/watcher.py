"""One backstop poll per watched thread per process, shared by all its followers.

Followers of the thread log wake on `hub.wake_thread` (this process's appends, and other
processes' through NOTIFY). The poll is the safety net for a wake-up that never came (a
replica whose listener is reconnecting, SQLite where nothing crosses processes). Polling per
follower made 1,000 idle subscribers 1,000 reads per interval, enough to exhaust the pool; so
one task per process reads the last seq of every watched thread in a few grouped statements
and wakes a thread's followers when it moved.

Why a moved last seq is enough: a follower takes its signal before its own read, so an append
after that read is seen by the first poll after the append (its predecessor ran before the
append, or the thread was new to the watcher, which always wakes once), and that poll wakes
the follower.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import defaultdict

from app.db.access import read
from app.runs.events import EventHub
from app.runs.threadlog import queries

log = logging.getLogger(__name__)

_CHUNK = 500  # thread ids per statement (bound parameters stay far below every limit)
_Key = tuple[str, str]  # (tenant_id, thread_id)


class LogWatcher:
    def __init__(self, hub: EventHub, interval: float) -> None:
        self.hub = hub
        self.interval = interval
        self._refs: dict[_Key, int] = {}
        self._seen: dict[_Key, int] = {}
        self._task: asyncio.Task[None] | None = None
        self.polls = 0  # statements run (tests and benches read it)

    def watch(self, tenant_id: str, thread_id: str) -> None:
        key = (tenant_id, thread_id)
        self._refs[key] = self._refs.get(key, 0) + 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="gk-threadlog-watch")

    def unwatch(self, tenant_id: str, thread_id: str) -> None:
        key = (tenant_id, thread_id)
        left = self._refs.get(key, 0) - 1
        if left > 0:
            self._refs[key] = left
            return
        self._refs.pop(key, None)
        self._seen.pop(key, None)
        # nothing left to watch: the task ends at its next wake-up on its own (never
        # cancelled, which could interrupt a read in the middle of its statement)

    @property
    def watched(self) -> int:
        return len(self._refs)

    async def _run(self) -> None:
        while self._refs and not self.hub.closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.hub.closing.wait(), timeout=self.interval)
            if self.hub.closing.is_set() or not self._refs:
                return
            try:
                await self.poll()
            except Exception:  # the next poll retries; followers keep their own reads
                log.warning("thread log watcher poll failed", exc_info=False)

    async def poll(self) -> None:
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant_id, thread_id in list(self._refs):
            by_tenant[tenant_id].append(thread_id)
        for tenant_id, thread_ids in by_tenant.items():
            for start in range(0, len(thread_ids), _CHUNK):
                chunk = thread_ids[start : start + _CHUNK]
                statement = queries.last_seqs(tenant_id=tenant_id, thread_ids=chunk)
                async with read(self.hub.engine) as conn:
                    rows = {r.thread_id: int(r.last) for r in await conn.execute(statement)}
                self.polls += 1
                for thread_id in chunk:
                    key = (tenant_id, thread_id)
                    if key not in self._refs:
                        continue  # left while we read
                    last = rows.get(thread_id, 0)
                    if self._seen.get(key) != last:
                        self._seen[key] = last
                        self.hub.wake_thread(thread_id)


_WATCHERS: weakref.WeakKeyDictionary[EventHub, LogWatcher] = weakref.WeakKeyDictionary()


def watcher_for(hub: EventHub, interval: float) -> LogWatcher:
    """The process's watcher of `hub` (ThreadLog objects are made per request)."""
    found = _WATCHERS.get(hub)
    if found is None:
        found = _WATCHERS[hub] = LogWatcher(hub, interval)
    return found

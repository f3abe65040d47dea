"""The thread stream (contract section 6.6): the events of every run on a thread, in order,
plus the thread's `state_update` events, for `GET /threads/{thread_id}/stream`.

A thread runs one run at a time (enqueued runs start in `created_at` order, and update_state
is refused while a run is pending or running), so the stream is a sequence of items ordered
by time: runs, ordered by their `created_at`, and state updates, ordered by when they were
stored. Each run's events are read with the hub's run reader (local log, database, NOTIFY
wake-ups), and its end becomes `metadata {"status": "run_done", "run_id": ...}`.

Event ids are `<item key>-<seq>`: the key is the item's time in epoch microseconds (the run's
`created_at`, or the state update's), the seq the run's own event sequence number (1 for a
state update). A `Last-Event-ID` of that form resumes after that event; `-` replays from the
start (whatever stored events are still kept).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.access import read
from app.db.types import utcnow
from app.errors import NotFound, ValidationFailed
from app.graphs.jsonable import dumps
from app.runs import event_queries as q
from app.runs.events import END_EVENT, STATE_UPDATE_EVENT, EventHub, StreamInterrupted
from app.statuses import ACTIVE_RUN_STATUSES

THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# Bounded so a hostile id is a 422, not a 500: the key (microseconds since 1970) at most 17
# digits (year 5138; datetime ends at 9999), the sequence at most 18 (fits a BIGINT).
_LAST_EVENT_ID = re.compile(r"^(\d{1,17})(?:-(\d{1,18}|\*))?$")
# Runs are keyed by the `created_at` their API process wrote; processes' clocks may differ a
# little, so a live stream looks this far back for runs it has not seen yet.
_SKEW = timedelta(seconds=30)
_NO_MORE = 1 << 62  # "every event of that item" (`<key>-*`)


@dataclass(frozen=True, slots=True)
class ThreadEvent:
    id: str
    event: str
    data: str


@dataclass(frozen=True, slots=True)
class _Item:
    key: int  # epoch microseconds
    item_id: str  # run id, or the state update's own id
    is_run: bool
    active: bool = False
    data: str = ""


def _key(moment: datetime) -> int:
    return (moment - _EPOCH) // _US


def _moment(key: int) -> datetime:
    return _EPOCH + key * _US


def parse_thread_last_event_id(value: str | None) -> tuple[int, int] | None:
    """`(key, seq)` to resume after; `(0, 0)` for `-`; None without the header (live only).

    The official format: `^\\d+(-(\\d+|\\*))?$` or `-`; anything else is a 422."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value == "-":
        return (0, 0)
    match = _LAST_EVENT_ID.match(value)
    if match is None:
        raise ValidationFailed(
            f"Last-Event-ID {value!r} is not a valid stream id (<number>-<number> or -)"
        )
    seq = match.group(2)
    return int(match.group(1)), _NO_MORE if seq == "*" else int(seq or 0)


def keep_event(event: str, modes: frozenset[str]) -> bool:
    """`run_modes`: every run event; `lifecycle`: run start and end (`metadata`);
    `state_update`: the thread's state updates."""
    if event == STATE_UPDATE_EVENT:
        return "state_update" in modes
    if "run_modes" in modes:
        return True
    return "lifecycle" in modes and event == "metadata"


class ThreadStream:
    """One client's view of a thread's events (live from now, or resumed after an id)."""

    def __init__(
        self,
        hub: EventHub,
        engine: AsyncEngine,
        *,
        tenant_id: str,
        thread_id: str,
        after: tuple[int, int] | None,
    ) -> None:
        self.hub = hub
        self.engine = engine
        self.tenant_id = tenant_id
        self.thread_id = thread_id
        self.after = after
        self._done: set[str] = set()
        self._live: set[str] = set()  # active when joined without an id: live events only
        self._since = _EPOCH if after is None else _moment(after[0])

    async def _thread_exists(self) -> bool:
        async with read(self.hub.engine) as conn:
            found = (
                await conn.execute(
                    q.thread_exists(thread_id=self.thread_id, tenant_id=self.tenant_id)
                )
            ).first()
        return found is not None

    async def check(self) -> None:
        """404 unless the thread exists for this tenant; called before the stream starts."""
        if not await self._thread_exists():
            raise NotFound(f"Thread '{self.thread_id}' not found")
        if self.after is None:
            # Joined live: what exists now is history, except runs in flight (joined live).
            self._since = utcnow() - _SKEW
            for item in await self._items():
                (self._live if item.active else self._done).add(item.item_id)

    async def _items(self) -> list[_Item]:
        """Runs and state updates not delivered yet, oldest first."""
        async with read(self.hub.engine) as conn:
            run_rows = await conn.execute(
                q.active_or_recent_runs(
                    thread_id=self.thread_id,
                    tenant_id=self.tenant_id,
                    since=self._since,
                    active=ACTIVE_RUN_STATUSES,
                )
            )
            items = [
                _Item(_key(r.created_at), r.run_id, True, active=r.status in ACTIVE_RUN_STATUSES)
                for r in run_rows
                if r.run_id not in self._done
            ]
            update_rows = await conn.execute(
                q.state_updates_since(
                    thread_id=self.thread_id,
                    tenant_id=self.tenant_id,
                    since=self._since,
                    event=STATE_UPDATE_EVENT,
                )
            )
            items += [
                _Item(_key(r.created_at), r.run_id, False, data=r.data)
                for r in update_rows
                if r.run_id not in self._done
            ]
        items.sort(key=lambda i: (i.key, i.item_id))
        return items

    def _finish(self, item: _Item, looked: datetime) -> None:
        # Items are taken oldest first, and anything created after the look that found this
        # one has a later time (up to the clocks' skew), so the next look's window can start
        # there; runs in flight are always in it.
        self._done.add(item.item_id)
        self._since = max(self._since, min(_moment(item.key), looked) - _SKEW)

    async def events(self) -> AsyncIterator[ThreadEvent | None]:
        """Thread events until the client leaves (or the thread is deleted); None items are
        keep-alives. Raises StreamInterrupted when the process shuts down."""
        floor = self.after or (0, 0)
        while True:
            if self.hub.closing.is_set():
                raise StreamInterrupted
            signal = self.hub.thread_signal(self.thread_id)  # before looking: no lost wake-up
            looked = utcnow()
            items = await self._items()
            if not items:
                if not await self._thread_exists():
                    return
                # a run starting in another process stores its events as they come (else
                # only at its end), and its first write wakes us
                await self.hub.announce_reader(thread_id=self.thread_id)
                try:
                    await asyncio.wait_for(asyncio.shield(signal), timeout=self.hub.keepalive)
                except TimeoutError:
                    yield None
                continue
            item = items[0]
            if not item.is_run:
                if (item.key, 1) > floor:
                    yield ThreadEvent(f"{item.key}-1", STATE_UPDATE_EVENT, item.data)
                self._finish(item, looked)
                continue
            if item.key < floor[0]:
                self._finish(item, looked)
                continue
            async for out in self._run_events(item, floor):
                yield out
            self._finish(item, looked)

    async def _run_events(
        self, item: _Item, floor: tuple[int, int]
    ) -> AsyncIterator[ThreadEvent | None]:
        if item.item_id in self._live:
            after: int | None = None
        else:
            after = floor[1] if item.key == floor[0] else 0
        async for ev in self.hub.read(
            item.item_id, tenant_id=self.tenant_id, after_seq=after, with_end=True
        ):
            if ev is None:
                yield None
            elif ev.event == END_EVENT:
                yield ThreadEvent(
                    f"{item.key}-{ev.seq}",
                    "metadata",
                    dumps({"status": "run_done", "run_id": item.item_id}),
                )
            else:
                yield ThreadEvent(f"{item.key}-{ev.seq}", ev.event, ev.data)


class StateUpdateEvents:
    """Publishes `state_update` events for update_state / supersteps: `record` is the
    state-change hook (stores the event in the state's transaction), `wake` tells this
    process's readers once it committed. The API and the console both use it."""

    def __init__(self, hub: Any, tenant_id: str) -> None:
        self.hub = hub
        self.tenant_id = tenant_id
        self.threads: list[str] = []

    async def record(self, conn: AsyncConnection, thread_id: str, latest: Any) -> None:
        data = dumps({"state": latest.model_dump(), "thread_id": thread_id})
        await self.hub.record_state_update(
            conn, tenant_id=self.tenant_id, thread_id=thread_id, data=data
        )
        self.threads.append(thread_id)

    def wake(self) -> None:
        for thread_id in self.threads:
            self.hub.wake_thread(thread_id)

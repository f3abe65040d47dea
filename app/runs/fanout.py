"""Local fan-out: readers in this process follow the runs executing here without the database.

`Wakeups` is one future per key (a run id, or a thread id), resolved at the next `wake(key)`:
a reader takes its future before it looks, so no wake-up between the look and the wait is
lost. `LocalLogs` holds the events of runs executing in this process; a run's publisher
appends to its log and wakes its readers.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field

from app.runs.event_log import END_EVENT, StreamEvent

_FLOOR_LIMIT = 1000  # seq floors kept for runs handed on (any older are long settled)


class Wakeups:
    """Futures resolved at the next `wake(key)`; a key nobody waits for costs nothing."""

    def __init__(self) -> None:
        self._futures: weakref.WeakValueDictionary[str, asyncio.Future[None]] = (
            weakref.WeakValueDictionary()
        )

    def signal(self, key: str) -> asyncio.Future[None]:
        """Resolved at the next `wake(key)`; take it before looking."""
        fut = self._futures.get(key)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._futures[key] = fut
        return fut

    def wake(self, key: str) -> None:
        fut = self._futures.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._futures.keys()):
            self.wake(key)


@dataclass
class LocalLog:
    """Events of a run executing in this process, for readers in this process."""

    run_id: str
    first_seq: int
    events: list[StreamEvent] = field(default_factory=list)
    closed: bool = False

    def after(self, seq: int) -> list[StreamEvent]:
        start = max(0, seq + 1 - self.first_seq)
        return self.events[start:]

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else self.first_seq - 1


class LocalLogs:
    """The local logs of the runs executing here, and the seq floors of runs handed on."""

    def __init__(self, runs: Wakeups) -> None:
        self.runs = runs
        self._logs: dict[str, LocalLog] = {}
        # The last seq published here by an attempt that did not end the run: its events may
        # not all be stored (the settle failed, the attempt was stopped), but readers here saw
        # them, so a next attempt here continues after it and no seq a client saw is reused.
        self._seq_floor: dict[str, int] = {}

    def open(self, run_id: str, *, first_seq: int) -> LocalLog:
        log = LocalLog(run_id=run_id, first_seq=first_seq)
        self._logs[run_id] = log
        return log

    def get(self, run_id: str) -> LocalLog | None:
        return self._logs.get(run_id)

    def last_seq(self, run_id: str) -> int:
        """The last seq this process published for the run (0 if none)."""
        log = self._logs.get(run_id)
        if log is not None and log.events:
            return log.events[-1].seq
        return self._seq_floor.get(run_id, 0)

    def append(self, log: LocalLog, event: StreamEvent) -> None:
        log.events.append(event)
        self.runs.wake(log.run_id)

    def release(self, log: LocalLog, *, ended: bool) -> None:
        """The run left this process: `ended` (its final status committed; readers here may
        stop without asking the database) or handed back (they read the rest from there)."""
        run_id = log.run_id
        if ended:
            self._seq_floor.pop(run_id, None)
            log.events.append(StreamEvent(log.last_seq + 1, END_EVENT, "null"))
        elif log.events:
            if len(self._seq_floor) > _FLOOR_LIMIT:
                self._seq_floor.clear()
            self._seq_floor[run_id] = max(self._seq_floor.get(run_id, 0), log.last_seq)
        log.closed = True
        if self._logs.get(run_id) is log:
            del self._logs[run_id]
        self.runs.wake(run_id)

"""Which runs readers in other processes follow from the database (`w` NOTIFYs).

A run's events normally wait for its final transaction (one write per run). When a reader
elsewhere announces itself for the run, or for its thread (a thread stream waiting for the
thread's next run), the run's publisher here starts storing them as they come.
"""

from __future__ import annotations

import time
from typing import Protocol


class Watchable(Protocol):
    run_id: str
    thread_id: str

    def watch(self) -> None: ...


class _Recent:
    """Keys announced within the last `ttl` seconds (bounded: old ones dropped at `limit`)."""

    def __init__(self, ttl: float, limit: int = 1000) -> None:
        self.ttl = ttl
        self.limit = limit
        self._at: dict[str, float] = {}

    def add(self, key: str) -> None:
        now = time.monotonic()
        if len(self._at) > self.limit:
            self._at = {k: t for k, t in self._at.items() if now - t < self.ttl}
        self._at[key] = now

    def __contains__(self, key: str) -> bool:
        at = self._at.get(key)
        return at is not None and time.monotonic() - at < self.ttl

    def discard(self, key: str) -> None:
        self._at.pop(key, None)


class Watches:
    """Announced readers elsewhere, and the publishers of this process they make eager."""

    def __init__(self, *, keepalive_seconds: float) -> None:
        # A run reader announces once per run; a thread reader every keep-alive, so its
        # announcement lapses three keep-alives after the reader went away.
        self.runs = _Recent(ttl=3600.0)
        self.threads = _Recent(ttl=3 * keepalive_seconds)
        self._publishers: dict[str, Watchable] = {}

    def watched(self, run_id: str, thread_id: str) -> bool:
        return run_id in self.runs or thread_id in self.threads

    def attach(self, publisher: Watchable) -> None:
        self._publishers[publisher.run_id] = publisher

    def detach(self, publisher: Watchable, *, ended: bool) -> None:
        if self._publishers.get(publisher.run_id) is publisher:
            del self._publishers[publisher.run_id]
            if ended:
                self.runs.discard(publisher.run_id)

    def watch_run(self, run_id: str) -> None:
        """A reader elsewhere follows `run_id`: store its events as they come, from now on
        (or from its start, if it starts here later)."""
        self.runs.add(run_id)
        publisher = self._publishers.get(run_id)
        if publisher is not None:
            publisher.watch()

    def watch_thread(self, thread_id: str) -> None:
        """A thread stream elsewhere waits for `thread_id`'s next run."""
        self.threads.add(thread_id)
        for publisher in list(self._publishers.values()):
            if publisher.thread_id == thread_id:
                publisher.watch()

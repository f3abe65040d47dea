"""Which other graphkeep processes share the database, as their NOTIFYs tell.

A NOTIFY costs more than its round trip: PostgreSQL serialises the commits of every
transaction that sent one on a cluster-wide lock held through the WAL flush (so they escape
group commit), and each is delivered to every listening session. When this process is the
only one listening, every NOTIFY it sends is heard by nobody else: it wakes its own readers
and workers directly. So a process sends its NOTIFYs only while it knows of another process.

Each process announces itself when its listener connects (`h`, hello: answered by every
other process with `p`, present) and again every `ANNOUNCE_SECONDS`; any notice from another
origin counts as presence. A process is forgotten `TTL_SECONDS` after it was last heard of.
The first instants of a newcomer are covered by the fallbacks every waiter has anyway: the
workers' queue poll and the readers' keep-alive look at the database.
"""

from __future__ import annotations

import time

ANNOUNCE_SECONDS = 30.0
TTL_SECONDS = 300.0  # ten announcements: a peer with a stalled loop is not dropped early


class Peers:
    def __init__(self) -> None:
        self._last_heard: dict[str, float] = {}

    def heard(self, origin: str) -> bool:
        """Record a notice from `origin`; True if it was not known (or had been forgotten)."""
        now = time.monotonic()
        known = self._alive(origin, now)
        self._last_heard[origin] = now
        return not known

    def _alive(self, origin: str, now: float) -> bool:
        at = self._last_heard.get(origin)
        return at is not None and now - at < TTL_SECONDS

    def any(self) -> bool:
        now = time.monotonic()
        for origin in list(self._last_heard):
            if self._alive(origin, now):
                return True
            del self._last_heard[origin]
        return False

"""Parking: a connection that just finished its work stays checked out for the next user.

A pool checkout and check-in cost about as much CPU as a small statement (SQLAlchemy's pool
events, its connection record and, for Core, the `Connection` wrapper and its autobegin and
reset), and under load the next statement comes within milliseconds. So the two users of the
serving engine's pool that run one statement after another keep a few connections parked:
the fast path behind the saver and the Store (`app.db.direct`, raw pooled connections) and
the Core reader every domain reads with (`app.db.access.read`, `AsyncConnection`s). A parked
connection goes back to the pool after `PARK_SECONDS` without use, when a unit on it fails,
and when its owner closes (before the engine is disposed).

How many each may park comes from the pool's capacity, its size and overflow
(`park_limits`): the connections held for the process's life, and at least half of the rest,
always stay free for transactions and the queue.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

PARK_MAX = 4  # connections one park keeps checked out between units, at most
# How long a connection that just finished a unit stays checked out for the next one.
PARK_SECONDS = 0.1
# Connections a process may hold for its whole life: the event listener's LISTEN and the
# workers' liveness lock.
HELD_FOR_LIFE = 2

T = TypeVar("T")


@dataclass(frozen=True)
class ParkLimits:
    """How many connections each user of one pool may park."""

    fast: int  # the saver's and the Store's fast path (`app.db.direct`)
    reads: int  # the Core reader (`app.db.access.read`)


def park_limits(pool_size: int | None, max_overflow: int = 0, *, reads: bool = True) -> ParkLimits:
    """The parking budget of a pool of `pool_size` that may open `max_overflow` more: half of
    what the connections held for life leave of that capacity, each park at most PARK_MAX;
    shared by the two parks when `reads` park too (the serving engine's), else all the fast
    path's. No size (SQLite's pools, where only the serving engine's reads park): PARK_MAX."""
    if pool_size is None:
        return ParkLimits(fast=PARK_MAX, reads=0)
    budget = max(0, (pool_size + max(0, max_overflow) - HELD_FOR_LIFE) // 2)
    read_share = min(PARK_MAX, budget // 2) if reads else 0
    return ParkLimits(fast=min(PARK_MAX, budget - read_share), reads=read_share)


class Park(Generic[T]):
    """Up to `limit` parked items (connections, with whatever their owner keeps beside them),
    each given back with `give_back` once idle for `idle_seconds`. Bound to the event loop of
    its first parking: items are never handed to another loop."""

    def __init__(
        self,
        limit: int,
        give_back: Callable[[T], Awaitable[None]],
        *,
        idle_seconds: float = PARK_SECONDS,
    ) -> None:
        self.limit = limit
        self._give_back = give_back
        self._idle_seconds = idle_seconds
        self._parked: list[tuple[T, float]] = []  # (item, idle since), oldest first
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._returning: set[asyncio.Future[None]] = set()

    @property
    def items(self) -> list[T]:
        """The parked items, oldest first."""
        return [item for item, _since in self._parked]

    def take(self, prefer: Callable[[T], bool] | None = None) -> T | None:
        """The most recently parked item (the most recent one `prefer` accepts, if any does),
        or None."""
        parked = self._parked
        if not parked or self._loop is not asyncio.get_running_loop():
            return None
        at = len(parked) - 1
        if prefer is not None:
            at = next((i for i in range(at, -1, -1) if prefer(parked[i][0])), at)
        return parked.pop(at)[0]

    def keep(self, item: T) -> bool:
        """Park `item` for the next user; False (the caller gives it back) when full."""
        if len(self._parked) >= self.limit:
            return False
        loop = asyncio.get_running_loop()
        if self._parked and self._loop is not loop:
            return False
        self._loop = loop
        self._parked.append((item, time.monotonic()))
        if self._expiry is None:
            self._expiry = loop.call_later(self._idle_seconds, self._expire)
        return True

    def _expire(self) -> None:
        """Give back the items idle for `idle_seconds`."""
        self._expiry = None
        now = time.monotonic()
        cutoff = now - self._idle_seconds
        idle = [item for item, since in self._parked if since <= cutoff]
        self._parked = [(item, since) for item, since in self._parked if since > cutoff]
        for item in idle:
            returning = asyncio.ensure_future(self._give_back(item))
            self._returning.add(returning)
            returning.add_done_callback(self._returning.discard)
        if self._parked and self._loop is not None:
            wait = self._parked[0][1] + self._idle_seconds - now
            self._expiry = self._loop.call_later(max(wait, 0.001), self._expire)

    def take_all(self) -> list[T]:
        """Every parked item (and stop the idle expiry): the caller gives them back."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        parked, self._parked = self._parked, []
        return [item for item, _since in parked]

    async def aclose(self) -> None:
        """Give back every parked item and wait for the returns under way (the expiry's),
        so no driver call outlives the event loop: on SQLite a return is a rollback on
        aiosqlite's thread, which fails with "Event loop is closed" after the loop."""
        returns = [self._give_back(item) for item in self.take_all()]
        await asyncio.gather(*returns, *list(self._returning), return_exceptions=True)

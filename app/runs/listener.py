"""The LISTEN side of the NOTIFY signals (PostgreSQL): one session-long connection per process.

LISTEN needs a connection that stays in its session for the life of the process: the listener
checks one out of the engine's pool (one pool per engine) and keeps it checked out while it
listens, using asyncpg's public `add_listener` / `add_termination_listener` on the driver
connection SQLAlchemy hands out (`get_raw_connection().driver_connection`). It reconnects
forever: the database may be down, restarting or frozen (the listener pings, since a frozen
server closes nothing); a lost connection is invalidated, so the pool never hands it out
again, and a stopped listener unlistens before its connection goes back. After each
(re)connect `on_connected` runs: anything announced while nobody listened is missed, so the
caller wakes everyone once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.runs import queue_queries
from app.runs.notify import NOTIFY_CHANNEL, Notice, decode

log = logging.getLogger(__name__)

PING_SECONDS = 5.0  # the LISTEN connection is checked this often (and this long)


class Listener:
    """Hands every decoded NOTIFY on the channel to `on_notice`."""

    def __init__(
        self,
        engine: AsyncEngine,
        on_notice: Callable[[Notice], None],
        on_connected: Callable[[], None],
    ) -> None:
        self.engine = engine
        self.on_notice = on_notice
        self.on_connected = on_connected
        self.listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start listening; waits (at most 10 s) until the connection listens."""
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="gk-listen")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.listening.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _deliver(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        notice = decode(payload)
        if notice is not None:
            self.on_notice(notice)

    async def _forever(self) -> None:
        while True:
            pooled: AsyncConnection | None = None
            listening: asyncpg.Connection | None = None
            lost = asyncio.Event()
            try:
                pooled = await asyncio.wait_for(self.engine.connect().start(), timeout=10)
                raw = await pooled.get_raw_connection()
                conn = raw.driver_connection
                if not isinstance(conn, asyncpg.Connection):
                    raise TypeError("the notify listener needs an asyncpg connection")
                conn.add_termination_listener(_setter(lost))
                await conn.add_listener(NOTIFY_CHANNEL, self._deliver)
                listening = conn
                self.listening.set()
                self.on_connected()
                await self._until_lost(conn, lost)
                log.warning("notify listener connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database may be down: retry, never die
                log.warning("notify listener failed: %s", type(exc).__name__)
            finally:
                if pooled is not None:
                    await asyncio.shield(self._give_back(pooled, listening, lost))
            self.listening.clear()
            await asyncio.sleep(1.0)

    async def _give_back(
        self, pooled: AsyncConnection, listening: asyncpg.Connection | None, lost: asyncio.Event
    ) -> None:
        """Return the connection to the pool unlistened (stopped while healthy), or invalidate
        it (lost, stalled, or it failed to unlisten): a pooled connection must not keep
        delivering notices to a listener that is gone."""
        healthy = listening is not None and not lost.is_set() and not listening.is_closed()
        if healthy and listening is not None:
            try:
                await asyncio.wait_for(
                    listening.remove_listener(NOTIFY_CHANNEL, self._deliver), timeout=2
                )
            except Exception:
                healthy = False
        with contextlib.suppress(Exception):
            if not healthy:
                await pooled.invalidate()
            await asyncio.wait_for(pooled.close(), timeout=2)

    async def _until_lost(self, conn: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Until the connection closes, or stops answering: a server that froze (or a
        partition) closes nothing, so the listener pings and reconnects after a stall."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), timeout=PING_SECONDS)
                return
            try:
                await conn.fetchval(queue_queries.ping_sql(), timeout=PING_SECONDS)
            except Exception:  # timed out or broken: reconnect
                return


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    return lambda _conn: event.set()

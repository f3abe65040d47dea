"""The LISTEN side of the NOTIFY signals (PostgreSQL): one session-long connection per process.

LISTEN needs a connection that stays in its session for the life of the process, so it is
the one connection that does not come from the engine's pool (the documented exception in
app/db/access.py): a plain asyncpg connection to the engine's database, using asyncpg's
public `add_listener` / `add_termination_listener`. It reconnects forever: the database may be
down, restarting or frozen (the listener pings, since a frozen server closes nothing). After
each (re)connect `on_connected` runs: anything announced while nobody listened is missed, so
the caller wakes everyone once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy import literal, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.runs.notify import NOTIFY_CHANNEL, Notice, decode

log = logging.getLogger(__name__)

PING_SECONDS = 5.0  # the LISTEN connection is checked this often (and this long)
_PING_SQL = str(
    select(literal(1)).compile(
        dialect=postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
        compile_kwargs={"literal_binds": True},
    )
)


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
        dsn = make_url(self.engine.url).set(drivername="postgresql")
        dsn_text = dsn.render_as_string(hide_password=False)
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(dsn_text, timeout=10)
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                await conn.add_listener(NOTIFY_CHANNEL, self._deliver)
                self.listening.set()
                self.on_connected()
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
            self.listening.clear()
            await asyncio.sleep(1.0)

    async def _until_lost(self, conn: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Until the connection closes, or stops answering: a server that froze (or a
        partition) closes nothing, so the listener pings and reconnects after a stall."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), timeout=PING_SECONDS)
                return
            try:
                await conn.fetchval(_PING_SQL, timeout=PING_SECONDS)
            except Exception:  # timed out or broken: reconnect
                return


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    return lambda _conn: event.set()

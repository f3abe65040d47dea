"""The cron scheduler: fires each due time once, however many processes run it.

One tick is one transaction: the due crons are selected `FOR UPDATE SKIP LOCKED` (PostgreSQL;
on SQLite the single process holds the write lock), each one's next due time is written and
its run created in the same transaction. Two schedulers never take the same row, and a
process that dies before committing leaves the row due and no run behind: the next tick of
any process fires it. Runs in every process that runs workers (app/main.py).

Policy (app/crons/schedule.py): a fired cron's next due time is the first slot after *now*,
so after downtime a cron fires once, not once per missed slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.auth.principal import ANONYMOUS_USER, Principal
from app.crons import queries as q
from app.crons.schedule import next_after, parse_timezone
from app.crons.schemas import CronStatus
from app.db.dialect import reader
from app.db.types import utcnow
from app.errors import AppError, Conflict, NotFound
from app.runs.schemas import RunCreate
from app.runs.service import RunService

log = logging.getLogger(__name__)


class Outcome:
    """`graphkeep_cron_firings_total{outcome}`."""

    FIRED = "fired"
    SKIPPED_BUSY = "skipped_busy"  # thread cron with multitask_strategy=reject on a busy thread
    ASSISTANT_DELETED = CronStatus.ASSISTANT_DELETED
    THREAD_DELETED = CronStatus.THREAD_DELETED
    INVALID = "invalid"
    ENDED = CronStatus.ENDED


@dataclass
class _Fired:
    cron_id: str
    tenant_id: str
    outcome: str
    lag: float
    run_id: str | None = None
    thread_id: str | None = None
    to_cancel: list[str] = field(default_factory=list)
    advance: dict[str, Any] = field(default_factory=dict)


@dataclass
class CronScheduler:
    engine: AsyncEngine
    runs: RunService
    poll_seconds: float = 1.0
    batch_size: int = 100
    clock: Callable[[], datetime] = utcnow  # injectable: tests move time, not the wall clock

    async def tick(self) -> int:
        """Fire what is due now, at most `batch_size`, in one transaction; how many claimed."""
        now = self.clock()
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    q.claim_due(self.engine.dialect.name, now=now, limit=self.batch_size)
                )
            ).all()
            fired = [await self._fire(conn, row, now) for row in rows]
            if rows:
                await q.advance_many(conn, [one.advance for one in fired], now=now)
            if any(one.run_id for one in fired):
                await self.runs.notify_queued(conn)  # one NOTIFY for the whole batch
        for one in fired:  # committed: the runs exist
            self.runs.after_commit(one.to_cancel)
            metrics.observe_cron_firing(one.outcome, one.lag)
            log.info(
                "cron firing",
                extra={
                    "cron_id": one.cron_id,
                    "tenant_id": one.tenant_id,
                    "outcome": one.outcome,
                    "lag_seconds": round(one.lag, 3),
                    "run_id": one.run_id,
                    "thread_id": one.thread_id,
                },
            )
        return len(rows)

    async def _fire(self, conn: AsyncConnection, row: Any, now: datetime) -> _Fired:
        due: datetime = row.next_run_date
        lag = max(0.0, (now - due).total_seconds())
        fired = _Fired(cron_id=row.cron_id, tenant_id=row.tenant_id, outcome=Outcome.FIRED, lag=lag)
        end: datetime | None = row.end_time
        if end is not None and due > end:
            fired.outcome = Outcome.ENDED
            self._advance(fired, row, None, CronStatus.ENDED)
            return fired
        upcoming: datetime | None = next_after(
            row.schedule, parse_timezone(row.timezone), max(now, due)
        )
        status = CronStatus.ACTIVE
        if end is not None and upcoming is not None and upcoming > end:
            upcoming, status = None, CronStatus.ENDED
        stateless = row.thread_id is None
        payload = dict(row.payload)
        payload["metadata"] = {**(row.metadata or {}), "cron_id": row.cron_id}
        if stateless:
            payload["on_completion"] = row.on_run_completed or "delete"
        # the creator's identity, kept with the cron; never anything a request sent
        principal = Principal(
            tenant_id=row.tenant_id, user_id=row.user_id or ANONYMOUS_USER, kind="cron"
        )
        try:
            run, fired.to_cancel = await self.runs.create_in(
                conn,
                principal=principal,
                thread_id=row.thread_id,
                payload=RunCreate(assistant_id=row.assistant_id, **payload),
            )
            fired.run_id, fired.thread_id = run["run_id"], run["thread_id"]
        except NotFound:
            # raised before the create wrote anything: the cron stops and says why
            gone = CronStatus.ASSISTANT_DELETED
            if not stateless and not await q.thread_exists(
                conn, tenant_id=row.tenant_id, thread_id=row.thread_id
            ):
                gone = CronStatus.THREAD_DELETED
            fired.outcome = gone
            self._advance(fired, row, None, gone, enabled=False)
            return fired
        except Conflict:
            fired.outcome = Outcome.SKIPPED_BUSY
        except (AppError, ValueError):
            fired.outcome = Outcome.INVALID
        self._advance(fired, row, upcoming, status)
        return fired

    def _advance(
        self,
        fired: _Fired,
        row: Any,
        upcoming: datetime | None,
        status: str,
        *,
        enabled: bool | None = None,
    ) -> None:
        """Record the row's new due time; the tick writes all of them in one executemany."""
        fired.advance = {
            "b_cron_id": row.cron_id,
            "b_next_run_date": upcoming,
            "b_status": status,
            "b_enabled": row.enabled if enabled is None else enabled,
        }

    async def _idle_wait(self) -> float:
        """Seconds until the next due time, at most the poll interval; sets the due gauge."""
        now = self.clock()
        async with reader(self.engine).connect() as conn:
            metrics.set_crons_due(int((await conn.execute(q.count_due(now))).scalar_one()))
            upcoming: datetime | None = (await conn.execute(q.next_due(now))).scalar_one_or_none()
        if upcoming is None:
            return self.poll_seconds
        wait: float = (upcoming - now).total_seconds()
        return max(0.0, min(self.poll_seconds, wait))

    async def run_forever(self) -> None:
        while True:
            try:
                claimed = await self.tick()
                if claimed >= self.batch_size:
                    continue  # more are due: no sleep
                await asyncio.sleep(await self._idle_wait())
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: retry; nothing is lost, rows stay due
                log.warning("cron scheduler tick failed; retrying", exc_info=True)
                await asyncio.sleep(self.poll_seconds)

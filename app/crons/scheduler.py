"""The cron scheduler: fires each due time once, however many processes run it.

One tick is one transaction: a batch of due crons is selected `FOR UPDATE SKIP LOCKED`
(PostgreSQL; on SQLite the single process holds the write lock), their runs created set-based
and every next due time written in the same transaction. Two schedulers never take the same
row, and a process that dies before committing leaves the row due and no run behind: the next
tick of any process fires it. Runs in every process that runs workers (app/main.py).

Policy (app/crons/schedule.py): a fired cron's next due time is the first slot after *now*,
so after downtime a cron fires once, not once per missed slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.crons import firing
from app.crons import queries as q
from app.db.access import read, transaction
from app.db.types import utcnow
from app.runs.service import RunService

log = logging.getLogger(__name__)


@dataclass
class CronScheduler:
    engine: AsyncEngine
    runs: RunService
    poll_seconds: float = 1.0
    batch_size: int = 500
    # ticks in flight at once on PostgreSQL while a backlog lasts (each its own transaction
    # and SKIP LOCKED batch, so disjoint). 1 by default: on the shared 2-core machine 2 won
    # under heavy load (committed-lag p50 0.65-0.85x) and lost when quieter (1.05-1.6x), for
    # more CPU per firing (bench/cron_bench.py --concurrency). SQLite has one writer: 1.
    concurrency: int = 1
    clock: Callable[[], datetime] = utcnow  # injectable: tests move time, not the wall clock

    async def tick(self) -> int:
        """Fire what is due now, at most `batch_size`, in one transaction; how many claimed.

        Set-based: the claim, one read of the batch's assistants, one multi-row insert of the
        stateless firings' threads and one of their runs, one executemany advancing every
        claimed row, one NOTIFY. A row that cannot fire fails alone (app/crons/firing.py)."""
        now = self.clock()
        async with transaction(self.engine) as conn:
            rows = (
                await conn.execute(
                    q.claim_due(self.engine.dialect.name, now=now, limit=self.batch_size)
                )
            ).all()
            if not rows:
                return 0
            found = await q.assistants_for(conn, {row.assistant_id for row in rows})
            slots = firing.NextSlots(now)
            fired = [firing.plan(row, found, self.runs.graphs, now, slots) for row in rows]
            await firing.write_stateless(conn, [f for f in fired if f.run_row is not None])
            for one, row in zip(fired, rows, strict=True):
                if one.payload is not None:
                    await firing.fire_on_thread(conn, one, row, self.runs)
            await q.advance_many(conn, [one.advance for one in fired], now=now)
            if any(one.run_id for one in fired):
                await self.runs.notify_queued(conn)  # one NOTIFY for the whole batch
        for one in fired:  # committed: the runs exist
            self.runs.after_commit(one.to_cancel)
            if one.run_id is not None and one.run_row is not None:
                metrics.count_run_created(one.graph_id)  # create_in counts its own
            metrics.observe_cron_firing(one.outcome, one.lag)
            log.log(
                logging.WARNING if one.outcome == firing.Outcome.FAILED else logging.INFO,
                "cron firing",
                extra={
                    "cron_id": one.cron_id,
                    "tenant_id": one.tenant_id,
                    "outcome": one.outcome,
                    "lag_seconds": round(one.lag, 3),
                    "run_id": one.run_id,
                    "thread_id": one.thread_id,
                    "error": one.error,
                },
            )
        return len(rows)

    async def _idle_wait(self) -> float:
        """Seconds until the next due time, at most the poll interval; sets the due gauge."""
        now = self.clock()
        async with read(self.engine) as conn:
            metrics.set_crons_due(int((await conn.execute(q.count_due(now))).scalar_one()))
            upcoming: datetime | None = (await conn.execute(q.next_due(now))).scalar_one_or_none()
        if upcoming is None:
            return self.poll_seconds
        wait: float = (upcoming - now).total_seconds()
        return max(0.0, min(self.poll_seconds, wait))

    async def run_forever(self) -> None:
        """One loop polls (idle cost: its queries per poll interval); while a backlog lasts
        (a tick claimed a full batch) `concurrency - 1` more loops tick alongside it."""
        backlog = asyncio.Event()
        helpers = self.concurrency - 1 if self.engine.dialect.name == "postgresql" else 0
        await asyncio.gather(self._poll(backlog), *(self._help(backlog) for _ in range(helpers)))

    async def _poll(self, backlog: asyncio.Event) -> None:
        while True:
            try:
                claimed = await self.tick()
                if claimed >= self.batch_size:
                    backlog.set()
                    continue  # more are due: no sleep
                backlog.clear()
                await asyncio.sleep(await self._idle_wait())
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: retry; nothing is lost, rows stay due
                log.warning("cron scheduler tick failed; retrying", exc_info=True)
                await asyncio.sleep(self.poll_seconds)

    async def _help(self, backlog: asyncio.Event) -> None:
        while True:
            await backlog.wait()
            try:
                if await self.tick() < self.batch_size:
                    backlog.clear()  # drained: back to one polling loop
            except asyncio.CancelledError:
                raise
            except Exception:
                backlog.clear()
                log.warning("cron scheduler tick failed; retrying", exc_info=True)
                await asyncio.sleep(self.poll_seconds)

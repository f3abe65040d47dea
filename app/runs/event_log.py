"""The `run_events` store: each run's seq-numbered events, its `__end__` row, thread-level
`state_update` rows and their expiry.

Rows are written in batches by a run's publisher (app/runs/publisher.py) or by the run's
final transaction (`end_row`, inserted with the final status); each write that readers in
other processes may wait for sends its `e` NOTIFY in the same transaction
(app/runs/notify.py). Reads are single autocommitted statements (app/db/access.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import metrics
from app.db.access import read, transaction
from app.db.types import utcnow
from app.runs import event_queries as q
from app.runs import notify
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.schemas import new_run_id
from app.statuses import FINAL_RUN_STATUSES

END_EVENT = "__end__"  # internal terminal marker, never sent to clients
STATE_UPDATE_EVENT = "state_update"  # thread-level event, stored under an id of its own
READ_BATCH = 500


@dataclass(frozen=True, slots=True)
class StreamEvent:
    seq: int
    event: str
    data: str  # compact JSON, sent as is


class EventLog:
    """Reads and writes `run_events` for one engine; `origin` names this process in the
    NOTIFYs its writes send, only while `others_listen()` (EventHub.others_listen)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        retention_seconds: float,
        origin: str,
        others_listen: Callable[[], bool],
    ) -> None:
        self.engine = engine
        self.retention = timedelta(seconds=retention_seconds)
        self.origin = origin
        self.others_listen = others_listen

    async def _announce(self, conn: AsyncConnection, run_id: str, thread_id: str) -> None:
        if self.others_listen():
            await notify.send(conn, notify.events(run_id, thread_id, origin=self.origin))

    # ------------------------------------------------------------------ rows

    def row(
        self, *, run_id: str, thread_id: str, tenant_id: str, seq: int, event: str, data: str
    ) -> dict[str, Any]:
        """A row of a live run (no expiry until the run ends)."""
        return {
            "run_id": run_id,
            "seq": seq,
            "thread_id": thread_id,
            "tenant_id": tenant_id,
            "event": event,
            "data": data,
            "created_at": utcnow(),
            "expires_at": None,
        }

    def end_row(self, *, run_id: str, thread_id: str, tenant_id: str, seq: int) -> dict[str, Any]:
        """The `__end__` row closing a run's stream; insert it with the final status."""
        row = self.row(
            run_id=run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq, event=END_EVENT,
            data="null",
        )  # fmt: skip
        row["expires_at"] = row["created_at"] + self.retention
        return row

    # ------------------------------------------------------------------ writes

    async def store(
        self,
        batch: list[dict[str, Any]],
        *,
        run_id: str,
        thread_id: str,
        token: FencingToken | None,
    ) -> None:
        """One batch of a live run's rows and its NOTIFY; with `token`, only while that
        attempt owns the run (else AttemptSuperseded)."""
        if token is None:
            # Autocommit on PostgreSQL: the NOTIFY commits after the rows it announces.
            async with transaction(self.engine, one_statement=True) as conn:
                await conn.execute(q.insert_events(), batch)
                await self._announce(conn, run_id, thread_id)
            return
        async with transaction(self.engine) as conn:
            # The owner row share-locked (PostgreSQL; SQLite holds its write lock): a reaper
            # or a newer attempt's claim waits for this commit, or this sees them and stops.
            owner = (await conn.execute(q.owner_share_lock(token))).first()
            if owner is None:
                metrics.count_fenced_refusal("events")
                raise AttemptSuperseded(token, "events")
            await conn.execute(q.insert_events(), batch)
            await self._announce(conn, run_id, thread_id)

    async def close_stream(
        self, conn: AsyncConnection, *, run_id: str, thread_id: str, tenant_id: str, seq: int
    ) -> None:
        """In `conn`'s transaction: the `__end__` row at `seq`, the expiry, the NOTIFY."""
        await conn.execute(
            q.insert_events(),
            [self.end_row(run_id=run_id, thread_id=thread_id, tenant_id=tenant_id, seq=seq)],
        )
        await self.set_expiry(conn, run_id=run_id, tenant_id=tenant_id)
        await self._announce(conn, run_id, thread_id)

    async def record_state_update(
        self, conn: AsyncConnection, *, tenant_id: str, thread_id: str, data: str
    ) -> None:
        """A thread's `state_update` event (seq 1 under an id of its own) and its NOTIFY."""
        event_id = new_run_id()
        row = self.row(
            run_id=event_id, thread_id=thread_id, tenant_id=tenant_id, seq=1,
            event=STATE_UPDATE_EVENT, data=data,
        )  # fmt: skip
        row["expires_at"] = row["created_at"] + self.retention
        await conn.execute(q.insert_events(), [row])
        await self._announce(conn, event_id, thread_id)

    async def set_expiry(self, conn: AsyncConnection, *, run_id: str, tenant_id: str) -> None:
        """Events expire `retention` after their run ended."""
        await conn.execute(
            q.set_expiry(run_id=run_id, tenant_id=tenant_id, expires_at=utcnow() + self.retention)
        )

    # ------------------------------------------------------------------ reads

    async def max_seq(
        self, run_id: str, *, tenant_id: str, conn: AsyncConnection | None = None
    ) -> int:
        """The highest seq stored for the run; 0 if none."""
        stmt = q.max_seq(run_id=run_id, tenant_id=tenant_id)
        if conn is not None:
            return int((await conn.execute(stmt)).scalar() or 0)
        async with read(self.engine) as own:
            return int((await own.execute(stmt)).scalar() or 0)

    async def fetch(self, run_id: str, *, tenant_id: str, after: int) -> list[StreamEvent]:
        """One batch (at most READ_BATCH) of the run's stored events after seq `after`."""
        async with read(self.engine) as conn:
            rows = await conn.execute(
                q.events_after(run_id=run_id, tenant_id=tenant_id, after=after, limit=READ_BATCH)
            )
            return [StreamEvent(r.seq, r.event, r.data) for r in rows]

    async def run_over(self, run_id: str, *, tenant_id: str) -> bool:
        """The run is final (or gone): its stored events are all there will be."""
        async with read(self.engine) as conn:
            status = (await conn.execute(q.run_status(run_id=run_id, tenant_id=tenant_id))).scalar()
        return status is None or status in FINAL_RUN_STATUSES

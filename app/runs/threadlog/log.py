"""Appending to and reading the per-thread event log.

Writers are run attempts: `append` is fenced by the attempt's token (app/runs/fencing.py),
allocates seqs in the inserting statement and wakes this process's readers and, through the
hub's NOTIFY, the other processes'. Readers poll `seq > cursor` on a wake-up, or every
`poll_seconds` as a backstop (a replica whose NOTIFY listener is reconnecting).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.dialect import reader
from app.db.types import utcnow
from app.runs.events import EventHub
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.threadlog import queries
from app.runs.threadlog.codec import decode_payload, encode_payload

log = logging.getLogger(__name__)

_SEQ_RETRIES = 8  # concurrent writers of one thread (multitask interrupt) collide on seq
_READ_BATCH = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class LogEvent:
    seq: int
    event_id: str
    method: str
    namespace: list[str]
    data: str  # compact JSON text
    timestamp: int  # ms since the epoch

    def envelope(self) -> str:
        """The protocol's event envelope as compact JSON (data spliced in, not re-encoded)."""
        head = json.dumps(
            {"type": "event", "event_id": self.event_id, "seq": self.seq, "method": self.method},
            separators=(",", ":"),
        )
        params = json.dumps(
            {"namespace": self.namespace, "timestamp": self.timestamp}, separators=(",", ":")
        )
        return f'{head[:-1]},"params":{params[:-1]},"data":{self.data}}}}}'

    def data_name(self) -> str | None:
        """`data.name` of a custom event (named channels), else None."""
        if '"name"' not in self.data:
            return None
        try:
            value = json.loads(self.data)
        except ValueError:
            return None
        name = value.get("name") if isinstance(value, dict) else None
        return name if isinstance(name, str) and name else None


class ThreadLog:
    def __init__(self, engine: AsyncEngine, hub: EventHub, *, poll_seconds: float = 1.0) -> None:
        self.engine = engine
        self.hub = hub
        self.poll_seconds = poll_seconds

    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        token: FencingToken,
        events: Sequence[tuple[str, Sequence[str], Any]],
        settled: bool = False,
    ) -> None:
        """Append `(method, namespace, data)` events; AttemptSuperseded when the attempt no
        longer owns its run (nothing was written)."""
        if not events:
            return
        rows = [
            (method, json.dumps(list(ns), separators=(",", ":")), encode_payload(data))
            for method, ns, data in events
        ]
        statement = queries.append_events(
            tenant_id=tenant_id,
            thread_id=thread_id,
            token=token,
            rows=rows,
            now=utcnow(),
            settled=settled,
        )
        for retry in range(_SEQ_RETRIES):
            try:
                async with self.engine.begin() as conn:
                    result = await conn.execute(statement)
                    if result.rowcount == 0:
                        raise AttemptSuperseded(token, "thread log append")
                    await self.hub.notify(conn, "e", token.run_id, thread_id=thread_id)
                break
            except IntegrityError:
                if retry == _SEQ_RETRIES - 1:
                    raise
                await asyncio.sleep(0.002 * (retry + 1))
        self.hub.wake_thread(thread_id)

    async def oldest_seq(self, *, tenant_id: str, thread_id: str) -> int | None:
        async with reader(self.engine).connect() as conn:
            value = (
                await conn.execute(queries.oldest_seq(tenant_id=tenant_id, thread_id=thread_id))
            ).scalar()
        return int(value) if value is not None else None

    async def read_after(self, *, tenant_id: str, thread_id: str, since: int) -> list[LogEvent]:
        async with reader(self.engine).connect() as conn:
            rows = (
                await conn.execute(
                    queries.read_after(
                        tenant_id=tenant_id, thread_id=thread_id, since=since, limit=_READ_BATCH
                    )
                )
            ).all()
        return [
            LogEvent(
                seq=int(r.seq),
                event_id=r.event_id,
                method=r.method,
                namespace=json.loads(r.namespace),
                data=decode_payload(r.data),
                timestamp=int((r.created_at - _EPOCH).total_seconds() * 1000),
            )
            for r in rows
        ]

    async def follow(
        self, *, tenant_id: str, thread_id: str, since: int, heartbeat: float
    ) -> AsyncIterator[list[LogEvent]]:
        """Batches of events with `seq > since`, then live ones, forever; an empty batch
        every `heartbeat` seconds of silence. Ends when the process shuts down."""
        cursor = since
        quiet = 0.0
        while not self.hub.closing.is_set():
            signal = self.hub.thread_signal(thread_id)  # before reading: no lost wake-up
            batch = await self.read_after(tenant_id=tenant_id, thread_id=thread_id, since=cursor)
            if batch:
                cursor = batch[-1].seq
                quiet = 0.0
                yield batch
                continue
            wait = min(self.poll_seconds, heartbeat - quiet)
            try:
                await asyncio.wait_for(asyncio.shield(signal), timeout=max(wait, 0.01))
            except TimeoutError:
                quiet += wait
                if quiet >= heartbeat:
                    quiet = 0.0
                    yield []

"""A run's publisher: appends its events live to the local log, and to `run_events` in batches.

Database writes wait `COALESCE_SECONDS` so events produced together go in one INSERT; the
events still pending when the run ends are written by the settling transaction itself
(`final_rows`), so a short run costs no separate event write at all. Until the publisher is
`eager` (resumable stream) or watched (a reader elsewhere, app/runs/watches.py), no batch is
written before the end: the final transaction stores them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.runs.event_log import EventLog, StreamEvent
from app.runs.fanout import LocalLog, LocalLogs
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.watches import Watches

log = logging.getLogger(__name__)


class RunPublisher:
    """Publishes one run attempt's events (made by `EventHub.publisher`)."""

    COALESCE_SECONDS = 0.02

    def __init__(
        self,
        *,
        event_log: EventLog,
        logs: LocalLogs,
        watches: Watches,
        local: LocalLog,
        thread_id: str,
        tenant_id: str,
        eager: bool = True,
        token: FencingToken | None = None,
    ) -> None:
        self.event_log = event_log
        self.logs = logs
        self.watches = watches
        self.local = local
        self.token = token
        self.run_id = local.run_id
        self.thread_id = thread_id
        self.tenant_id = tenant_id
        self._eager = eager
        self._seq = local.first_seq - 1
        self._pending: list[dict[str, Any]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writing = False
        self._final = False
        self._failure: BaseException | None = None
        self.wrote_any = False  # some rows were stored before the final transaction

    @property
    def last_seq(self) -> int:
        return self._seq

    def emit(self, event: str, data: str) -> StreamEvent:
        """Publish one event (data is compact JSON text)."""
        if self._failure is not None:
            raise self._failure
        self._seq += 1
        ev = StreamEvent(self._seq, event, data)
        self.logs.append(self.local, ev)
        self._pending.append(
            self.event_log.row(
                run_id=self.run_id,
                thread_id=self.thread_id,
                tenant_id=self.tenant_id,
                seq=ev.seq,
                event=event,
                data=data,
            )  # fmt: skip
        )
        if self._eager and not self._final:
            self._start_writer()
        return ev

    def stored_elsewhere(self, seq: int, event: str, data: str) -> None:
        """An event the run's end stored itself (finish.give_up): readers here see it too,
        before the end marker."""
        self._seq = max(self._seq, seq)
        self.logs.append(self.local, StreamEvent(seq, event, data))

    def watch(self) -> None:
        """A reader elsewhere follows the run: store what is pending now, then every batch."""
        if self._eager:
            return
        self._eager = True
        if self._pending and not self._final:
            self._start_writer(delay=0)

    def _start_writer(self, delay: float | None = None) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches(delay), name="gk-events")

    async def _write_batches(self, delay: float | None = None) -> None:
        while self._pending and not self._final:
            await asyncio.sleep(self.COALESCE_SECONDS if delay is None else delay)
            if self._final or not self._pending:
                return
            batch, self._pending = self._pending, []
            self._writing = True
            try:
                await self.event_log.store(
                    batch, run_id=self.run_id, thread_id=self.thread_id, token=self.token
                )
                self.wrote_any = True
            except AttemptSuperseded as exc:
                self._failure = exc  # a newer attempt owns the run: this one stops
                return
            except Exception as exc:
                self._failure = exc
                log.error("writing run events failed", extra={"run_id": self.run_id})
                return
            finally:
                self._writing = False

    async def _stop_writer(self) -> None:
        writer = self._writer
        if writer is None or writer.done():
            return
        if self._writing:
            await asyncio.shield(writer)  # a batch is in flight: let it commit
        else:
            writer.cancel()  # only sleeping: the rows stay pending
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    async def flush(self) -> None:
        """Store every emitted event now; raises if storing failed."""
        await self._stop_writer()
        if self._pending and not self._final:
            self._start_writer(delay=0)
            assert self._writer is not None
            await asyncio.shield(self._writer)
        if self._failure is not None:
            raise self._failure

    async def final_rows(self) -> list[dict[str, Any]]:
        """Every event not stored yet plus the `__end__` row, with their expiry set: insert
        them in the transaction that sets the run's final status."""
        self._final = True
        await self._stop_writer()
        if self._failure is not None:
            raise self._failure
        rows, self._pending = self._pending, []
        self._seq += 1
        end = self.event_log.end_row(
            run_id=self.run_id, thread_id=self.thread_id, tenant_id=self.tenant_id, seq=self._seq
        )
        for row in rows:
            row["expires_at"] = end["expires_at"]
        return [*rows, end]

    def close(self, *, ended: bool = False) -> None:
        """Call after the final transaction committed (`ended`) or the run was handed back."""
        self.logs.release(self.local, ended=ended)
        self.watches.detach(self, ended=ended)

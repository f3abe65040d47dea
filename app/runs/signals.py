"""How the worker tells an executing run attempt to stop, and how the attempt learns it lost
its run (app/runs/fencing.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import RunControl


@dataclass
class RunSignals:
    """How the worker tells an executing run to stop."""

    control: RunControl = field(default_factory=RunControl)
    cancel_action: str | None = None  # interrupt | rollback, asked for by a client
    abandon: bool = False  # lease lost or shutdown deadline: leave the run to recovery
    settling: bool = False  # the graph is done; cancelling now would only break the settle
    superseded: str | None = None  # what of this attempt was refused (lease, checkpoint, ...)
    # monotonic time the lease is known to hold until (the worker's lease-keeper moves it),
    # and how to ask the database again once it passed (a stalled process, a slow loop)
    lease_until: float = float("inf")
    confirm_lease: Callable[[], Awaitable[bool]] | None = None

    async def check_lease(self) -> None:
        """Between graph steps: a lease that may have lapsed is confirmed before the next
        step starts, so an attempt that was stalled past its lease starts no further node."""
        if time.monotonic() <= self.lease_until or self.confirm_lease is None:
            return
        if not await self.confirm_lease():
            self.supersede("lease", None)
            raise asyncio.CancelledError

    def refused(self, what: str, task: asyncio.Task[Any] | None) -> None:
        """A fenced write of the graph was refused. While the graph runs, that means a newer
        attempt owns the run: stop this one (`supersede`). Once it is settling, the graph is
        done: a write still in flight then (durability "async" checkpoints outlive a cancelled
        graph) is refused because this attempt's own settle ended the run, or, if another
        attempt took the run, the settle's own fence refuses it; cancelling the settle here
        would lose the run's root terminal and its after-run bookkeeping."""
        if self.settling:
            return
        self.supersede(what, task)

    def supersede(self, what: str, task: asyncio.Task[Any] | None) -> None:
        """A newer attempt owns the run: stop this one now (cancel its task, if not the
        caller's own: that one raises AttemptSuperseded itself)."""
        if self.superseded is None:
            self.superseded = what
        self.abandon = True
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()

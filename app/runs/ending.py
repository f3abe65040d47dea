"""How a run attempt ends when it cannot settle normally: superseded (a newer attempt owns
the run: one WARNING, nothing written), its settle failed (the run is handed to its next
attempt at once), or its attempts ran out (the run ends `error` for good, `finish.give_up`).
A mixin of RunExecutor (app/runs/executor.py)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.access import read, transaction
from app.graphs.jsonable import dumps
from app.runs import finish, queries
from app.runs.events import EventHub, RunPublisher
from app.runs.fencing import AttemptSuperseded, FencingToken
from app.runs.queue import ClaimedRun, release
from app.statuses import ThreadStatus

log = logging.getLogger(__name__)


class AttemptEnding:
    engine: AsyncEngine
    hub: EventHub
    max_attempts: int

    async def _warn_superseded(self, token: FencingToken, what: str) -> None:
        """The one WARNING of a stopped attempt: the run, this attempt and the current one."""
        current: Any = None
        try:
            async with read(self.engine) as conn:
                current = (await conn.execute(queries.current_attempt(token.run_id))).first()
        except Exception:  # the warning goes out all the same
            log.debug("current attempt not read", exc_info=True)
        if what == "lease":
            metrics.count_fenced_refusal("lease")
        log.warning(
            "run attempt superseded: its %s was refused; attempt stopped",
            what,
            extra={
                "run_id": token.run_id,
                "attempt": token.attempt,
                "current_attempt": None if current is None else current.attempt,
                "current_status": None if current is None else current.status,
            },
        )

    async def _settle_failed(
        self, run: ClaimedRun, publisher: RunPublisher, exc: Exception, *, worker_id: str
    ) -> bool:
        """The settle raised. Attempts left: hand the run to the next one now (it resumes from
        the last checkpoint; no lease to wait out). None left: end it `error`. True if the
        run ended here."""
        reason = type(exc).__name__
        if run.attempt < self.max_attempts:
            try:
                async with transaction(self.engine) as conn:
                    await release(conn, run_id=run.run_id, worker_id=worker_id, attempt=run.attempt)
                    await self.hub.notify(conn, "q")
                self.hub.queue_wakeup.set()
            except Exception:  # the database is away: the lease expires instead
                log.warning("handing a failed run back failed", extra={"run_id": run.run_id})
            return False
        err = {
            "error": "RunSettleFailed",
            "message": f"ending the run failed ({reason}) in its last allowed attempt "
            f"({run.attempt} of {self.max_attempts})",
        }
        return await self._give_up(run, publisher, err, reason)

    async def _give_up(
        self, run: ClaimedRun, publisher: RunPublisher, err: dict[str, str], reason: str
    ) -> bool:
        """End the run `error` for good (finish.give_up); True if it ended here."""
        try:
            settled, seq = await finish.give_up(
                self.engine,
                self.hub,
                token=FencingToken(run.run_id, run.attempt),
                thread_id=run.thread_id,
                tenant_id=run.tenant_id,
                error=err,
                after_seq=publisher.last_seq,
            )
        except AttemptSuperseded:
            raise
        except Exception:
            log.exception(
                "ending a run that ran out of attempts failed", extra={"run_id": run.run_id}
            )
            return False
        publisher.stored_elsewhere(seq, "error", dumps(err))
        metrics.count_run_given_up(run.graph_id, reason)
        log.error(
            "run ended after its attempts ran out",
            extra={
                "run_id": run.run_id,
                "attempt": run.attempt,
                "max_attempts": self.max_attempts,
                "reason": reason,
                "error": err["error"],
            },
        )
        if settled == ThreadStatus.BUSY:
            self.hub.queue_wakeup.set()
        return True


_DEADLOCK = "40P01"  # PostgreSQL deadlock_detected
_UNIQUE = "23505"  # PostgreSQL unique_violation
_RETRIED = (_DEADLOCK, _UNIQUE)


async def retry_deadlock(settle: Any) -> Any:
    """The one-statement settle locks the run row, then the thread row; an interrupting run
    creation locks them the other way round. PostgreSQL breaks such a deadlock by failing one
    side; the settle then simply runs again (twice at most). The same for a writer of the
    thread's log that took the seq the settle's root terminal read (app/runs/finish_queries.py):
    the statement is atomic, so running it again is safe."""
    for tries in range(3):
        try:
            return await settle()
        except DBAPIError as exc:
            code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
            if code not in _RETRIED or tries == 2:
                raise
    raise AssertionError("unreachable")

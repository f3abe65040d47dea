"""Run fencing: the token a run attempt carries on every write it makes.

A run attempt is identified by `(run_id, attempt)`. Leases decide who may *start* a run;
the fencing token decides whose *writes* count: every write an attempt makes (checkpoints,
pending writes, run events, thread-stream log entries, lease renewal, the settle, webhooks,
NOTIFYs) is applied only if, in the same statement or transaction, the runs row still names
that attempt and is not final. A refused write raises `AttemptSuperseded`, and the executor
stops that attempt at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, exists, select

from app.db.tables import runs

# the statuses in which a run still has an owner whose writes may count
OWNED_STATUSES = ("running",)


@dataclass(frozen=True, slots=True)
class FencingToken:
    run_id: str
    attempt: int


class AttemptSuperseded(Exception):
    """A write of a run attempt that no longer owns its run was refused."""

    def __init__(self, token: FencingToken, what: str) -> None:
        super().__init__(f"run {token.run_id} attempt {token.attempt}: {what} refused")
        self.token = token
        self.what = what


# Bound names of the token in statements compiled once and run with `fence_params(token)`
# (the saver view's pre-compiled writes, the PostgreSQL settle statement).
FENCE_RUN_ID = "fence_run_id"
FENCE_ATTEMPT = "fence_attempt"


def fence_params(token: FencingToken) -> dict[str, Any]:
    return {FENCE_RUN_ID: token.run_id, FENCE_ATTEMPT: token.attempt}


def owns_run_bound() -> ColumnElement[bool]:
    """`owns_run` with the token as bound parameters (`fence_params`), for a statement
    compiled once and executed for many attempts."""
    return and_(
        runs.c.run_id == bindparam(FENCE_RUN_ID, type_=runs.c.run_id.type),
        runs.c.attempt == bindparam(FENCE_ATTEMPT, type_=runs.c.attempt.type),
        runs.c.status.in_(OWNED_STATUSES),
    )


def owns_run(token: FencingToken) -> ColumnElement[bool]:
    """A predicate over `runs`: the row is this attempt's and the run is still running."""
    return and_(
        runs.c.run_id == token.run_id,
        runs.c.attempt == token.attempt,
        runs.c.status.in_(OWNED_STATUSES),
    )


def still_owned(token: FencingToken) -> ColumnElement[bool]:
    """`EXISTS (...)` of `owns_run`, to make an INSERT ... SELECT or an UPDATE conditional."""
    return exists(select(runs.c.run_id).where(owns_run(token)))

"""Run fencing: the token a run attempt carries on every write it makes.

A run attempt is identified by `(run_id, attempt)`. Leases decide who may *start* a run;
the fencing token decides whose *writes* count: every write an attempt makes (checkpoints,
pending writes, run events, thread-stream log entries, lease renewal, the settle, webhooks,
NOTIFYs) is applied only if, in the same statement or transaction, the runs row still names
that attempt and is not final. A refused write raises `AttemptSuperseded`, and the executor
stops that attempt at once.

The predicates that say so are SQL, built in app/runs/queue_queries.py; they are re-exported
here with the token, where the writers of other packages (the saver view, the event and
thread logs) look for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.runs.queue_queries import (
    FENCE_ATTEMPT,
    FENCE_RUN_ID,
    OWNED_STATUSES,
    owns_run,
    owns_run_bound,
    still_owned,
)

__all__ = [
    "FENCE_ATTEMPT",
    "FENCE_RUN_ID",
    "OWNED_STATUSES",
    "AttemptSuperseded",
    "FencingToken",
    "fence_params",
    "owns_run",
    "owns_run_bound",
    "still_owned",
]


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


def fence_params(token: FencingToken) -> dict[str, Any]:
    """The token's values for a statement built with `owns_run_bound`."""
    return {FENCE_RUN_ID: token.run_id, FENCE_ATTEMPT: token.attempt}

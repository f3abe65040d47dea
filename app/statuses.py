"""Run and thread statuses, named once.

Both are `StrEnum`s, so they compare equal to, and serialise as, the strings the database
and the Agent Server API carry (`RunStatus.PENDING == "pending"`).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Where a run is in its life. `PENDING` and `RUNNING` are active; the rest are final."""

    PENDING = "pending"  # queued, waiting for a worker to claim it
    RUNNING = "running"  # claimed by a worker attempt that holds its lease
    SUCCESS = "success"  # the graph finished
    ERROR = "error"  # the graph raised, or the run used up its attempts
    TIMEOUT = "timeout"  # the run passed its deadline
    INTERRUPTED = "interrupted"  # cancelled, or stopped at an interrupt

    @property
    def is_active(self) -> bool:
        return self in ACTIVE_RUN_STATUSES


ACTIVE_RUN_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
FINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(set(RunStatus) - ACTIVE_RUN_STATUSES)


class ThreadStatus(StrEnum):
    """What a thread is doing, as the Agent Server reports it."""

    IDLE = "idle"  # no active run; the last one (if any) finished
    BUSY = "busy"  # a run is pending or running on it
    INTERRUPTED = "interrupted"  # the last run stopped at an interrupt; it waits for a resume
    ERROR = "error"  # the last run failed


# What a run attempt can come to besides a run status: its run deleted (a cancel with
# rollback) or handed back to the queue (its worker drained at shutdown).
ROLLBACK = "rollback"
DRAINED = "drained"

"""`strict_resume` (contract 5.2): a `command.resume` that answers no pending interrupt fails
with LangGraph's `UnknownInterruptError` and leaves the thread as it was.

Two places enforce it. At run creation, when the thread has no run in flight, its pending
interrupts are known: a resume that cannot match them is refused with 409 in the create's
own write (app/runs/service.py), so nothing is created and no state change slips in
between. A run queued behind others cannot be judged then (the runs before it change the
thread), so the run also carries the flag to LangGraph, which checks the resume against the
checkpoint it starts from and raises before writing anything; the run then ends `error`.
The rules are LangGraph's (`PregelLoop`): a map of interrupt ids must name only pending ones and
must not be empty; a single value is refused when several interrupts are pending, and accepted
when none are (it resumes a static breakpoint).
"""

from __future__ import annotations

import re
from typing import Any

from app.errors import Conflict

# The configurable key that turns on LangGraph's own check for one run. LangGraph exports it
# only from a private module (`langgraph._internal._constants.CONFIG_KEY_STRICT_RESUME`), so it
# is spelt here; pyproject bounds langgraph to the minor CI ran, and
# tests/e2e/test_runs_strict_resume.py::test_queued_strict_resume_fails_with_unknown_interrupt
# fails if LangGraph stops reading this key.
STRICT_RESUME_KEY = "__pregel_strict_resume"
_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")  # LangGraph's interrupt ids (xxh3_128 hex)


def _pending_ids(interrupts: Any) -> set[str]:
    """Interrupt ids from a thread's `interrupts` column ({task_id: [{id, value}, ...]})."""
    if not isinstance(interrupts, dict):
        return set()
    return {
        str(item["id"])
        for items in interrupts.values()
        if isinstance(items, list)
        for item in items
        if isinstance(item, dict) and item.get("id")
    }


def refusal(resume: Any, pending: set[str]) -> str | None:
    """Why LangGraph's strict mode would refuse `resume`; None if it would accept it."""
    if isinstance(resume, dict) and all(
        isinstance(k, str) and _INTERRUPT_ID.fullmatch(k) for k in resume
    ):
        if not resume:
            return "The resume map names no interrupt"
        unknown = sorted(set(resume) - pending)
        if unknown:
            return f"Unknown or already-consumed interrupt: {unknown[0]}"
        return None
    if len(pending) > 1:
        return (
            "When there are multiple pending interrupts, you must specify the interrupt id "
            "when resuming"
        )
    return None


def check(command: dict[str, Any] | None, interrupts: Any) -> None:
    """409 when `command.resume` cannot answer the thread's pending `interrupts` (its
    `interrupts` column). The run service calls it inside the create's write, and only when
    nothing is in flight on the thread (what runs before a queued run changes the thread)."""
    if not command or command.get("resume") is None:
        return
    reason = refusal(command["resume"], _pending_ids(interrupts))
    if reason is not None:
        raise Conflict(f"UnknownInterruptError: {reason}")

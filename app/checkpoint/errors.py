"""Errors the checkpointer raises on purpose (all `AppError`s, so the API maps them)."""

from __future__ import annotations

from app.errors import Conflict, InvalidInput


class InvalidCheckpointInput(InvalidInput, ValueError):
    """A thread id, namespace or checkpoint id the saver refuses (not a str, or too long)."""


class DeltaHistoryConflict(Conflict):
    """Deleting these rows would silently break a surviving DeltaChannel history."""


class ThreadHasCheckpoints(Conflict):
    """`copy_thread` onto a thread that already has checkpoints."""

"""Durable LangGraph checkpointer on SQLAlchemy (PostgreSQL and SQLite)."""

from app.checkpoint.errors import DeltaHistoryConflict, InvalidCheckpointInput, ThreadHasCheckpoints
from app.checkpoint.saver import SQLSaver
from app.checkpoint.serde import DecryptionFailed, make_serde

__all__ = [
    "DecryptionFailed",
    "DeltaHistoryConflict",
    "InvalidCheckpointInput",
    "SQLSaver",
    "ThreadHasCheckpoints",
    "make_serde",
]

"""Statements a run attempt reads alongside its saver's own (pure builders).

The executor's settle reads the thread's head checkpoint (for its values and interrupts);
the thread's history length, observed after every run, rides along in that statement as a
guard query (`SQLSaver.aprefetch_tuple`): no round trip of its own.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Select, Text, bindparam, cast, func, select

from app.db.tables import checkpoints


@cache
def history_length_guard(dialect_name: str, cap: int) -> Select[Any]:
    """The thread's root checkpoints counted up to `cap` (an index-only count), as the one
    JSON column a saver guard carries (see `app.checkpoint.tuple_queries.guard_rows`); it
    binds the checkpoint query's `tenant_id` and `thread_id`. Cached: the saver compiles a
    guarded get once per guard object."""
    capped = (
        select(checkpoints.c.checkpoint_id)
        .where(
            checkpoints.c.tenant_id == bindparam("tenant_id"),
            checkpoints.c.thread_id == bindparam("thread_id"),
            checkpoints.c.checkpoint_ns == "",
        )
        .limit(cap)
        .subquery()
    )
    count = select(func.count()).select_from(capped).scalar_subquery()
    # the guard's column shares the union's JSON column: jsonb on PostgreSQL, JSON text on
    # SQLite (decoded by the column's type either way: a number)
    value = func.to_jsonb(count) if dialect_name == "postgresql" else cast(count, Text)
    return select(value.label("history_length"))

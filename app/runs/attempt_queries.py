"""Statements of a run attempt beyond the saver's own (pure builders).

The fenced saver's writes (app/runs/fenced_saver.py): a checkpoint and a task's pending
writes, each conditional on the attempt still owning its run.

The executor's settle reads the thread's head checkpoint (for its values and interrupts);
the thread's history length, observed after every run, rides along in that statement as a
guard query (`SQLSaver.aprefetch_tuple`): no round trip of its own.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Integer, LargeBinary, Select, Text, bindparam, cast, exists, func, select

from app.checkpoint import queries
from app.db.dialect import insert_for, unnest_arrays
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints, runs
from app.runs.fencing import owns_run_bound


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


# --------------------------------------------------------------------------- fenced writes

_CHECKPOINT_COLUMNS = [c.name for c in checkpoints.columns]
WRITE_ROW_COLUMNS = {
    "task_id": Text(),
    "task_path": Text(),
    "idx": Integer(),
    "channel": Text(),
    "type": Text(),
    "blob": LargeBinary(),
}
WRITE_KEY_COLUMNS = ("tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id")


def _owner() -> Any:
    """The owning runs row, share-locked (why: app/runs/fenced_saver.py)."""
    return select(runs.c.run_id).where(owns_run_bound()).with_for_update(read=True).cte("owner")


def fenced_put() -> Select[Any]:
    """PostgreSQL: checkpoint + new blobs, each conditional on the owner; returns the owner
    count (0: refused, nothing written)."""
    owner = _owner()
    owned = exists(select(owner.c.run_id))
    values = select(
        *[bindparam(name, type_=checkpoints.c[name].type) for name in _CHECKPOINT_COLUMNS]
    ).where(owned)
    put = insert_for("postgresql", checkpoints).from_select(_CHECKPOINT_COLUMNS, values)
    put = queries.replacing_checkpoint(put)
    source = queries.blob_array_source("postgresql").where(owned)
    blobs = insert_for("postgresql", checkpoint_blobs).from_select(queries.BLOB_COLUMNS, source)
    blobs = blobs.on_conflict_do_nothing(index_elements=queries.BLOB_KEYS)
    return (
        select(func.count().label("owned"))
        .select_from(owner)
        .add_cte(put.cte("fenced_put"), blobs.cte("fenced_blobs"))
    )


def fenced_writes() -> Select[Any]:
    """PostgreSQL: a task's pending writes as parallel arrays, conditional on the owner."""
    owner = _owner()
    rows = unnest_arrays("postgresql", "w_", WRITE_ROW_COLUMNS)
    source = select(
        *[bindparam(name, type_=Text()) for name in WRITE_KEY_COLUMNS],
        *[rows.c[name] for name in WRITE_ROW_COLUMNS],
    ).where(exists(select(owner.c.run_id)))
    ins = insert_for("postgresql", checkpoint_writes).from_select(
        [*WRITE_KEY_COLUMNS, *WRITE_ROW_COLUMNS], source
    )
    ins = ins.on_conflict_do_update(  # as queries.insert_writes: special writes replace
        index_elements=queries.WRITE_KEYS,
        set_={name: ins.excluded[name] for name in ("task_path", "channel", "type", "blob")},
        where=checkpoint_writes.c.idx < 0,
    )
    return select(func.count().label("owned")).select_from(owner).add_cte(ins.cte("fenced_w"))


def fenced_sqlite_statements() -> tuple[Any, Any, Any, Any]:
    """SQLite: checkpoint, blobs and writes inserts, each conditional on the owner (bound by
    name, executemany), and the owner check."""
    owned = exists(select(runs.c.run_id).where(owns_run_bound()))

    def conditional(table: Any, names: list[str]) -> Any:
        values = select(*[bindparam(n, type_=table.c[n].type) for n in names]).where(owned)
        return insert_for("sqlite", table).from_select(names, values)

    put = conditional(checkpoints, _CHECKPOINT_COLUMNS)
    put = queries.replacing_checkpoint(put)
    blobs = conditional(checkpoint_blobs, queries.BLOB_COLUMNS)
    blobs = blobs.on_conflict_do_nothing(index_elements=queries.BLOB_KEYS)
    write_names = [c.name for c in checkpoint_writes.columns]
    writes = conditional(checkpoint_writes, write_names)
    writes = writes.on_conflict_do_update(
        index_elements=queries.WRITE_KEYS,
        set_={name: writes.excluded[name] for name in ("task_path", "channel", "type", "blob")},
        where=checkpoint_writes.c.idx < 0,
    )
    check = select(func.count().label("owned")).select_from(runs).where(owns_run_bound())
    return put, blobs, writes, check

"""Statement builders for the checkpoint tables' write path and upkeep (no I/O).

Put and put_writes (the saver's hot writes, also shaped by the fenced view in
app/runs/fenced_saver.py), deletes, copies and prunes, and the header-only reads of
maintenance and the thread tree. The get/list reads, which return checkpoints with their
values and writes in one union, are in `tuple_queries`.

Every statement takes the tenant and filters on it: the tables' primary keys lead with
`tenant_id, thread_id, checkpoint_ns`, so each query is a primary-key probe or a range
scan inside one thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Insert,
    LargeBinary,
    Select,
    String,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.engine import Dialect

from app.db.dialect import insert_for, unnest_arrays
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints

CP = checkpoints.c
BL = checkpoint_blobs.c
WR = checkpoint_writes.c

BLOB_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "channel", "version"]
CHECKPOINT_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id"]
WRITE_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]


def _in_thread(table: Any, tenant_id: str, thread_id: str, checkpoint_ns: str) -> Any:
    return and_(
        table.c.tenant_id == tenant_id,
        table.c.thread_id == thread_id,
        table.c.checkpoint_ns == checkpoint_ns,
    )


# --------------------------------------------------------------------------- writes (put)


# The write statements are built once per shape and reused with bound parameters: a reused
# statement object skips SQLAlchemy's per-call construction and cache-key work, and the driver
# reuses its prepared statement.

BLOB_COLUMNS = [c.name for c in checkpoint_blobs.columns]


def upsert_blobs(dialect: Dialect) -> Insert:
    """Insert channel values (executemany); a (channel, version) already stored is kept."""
    stmt = insert_for(dialect, checkpoint_blobs)
    return stmt.on_conflict_do_nothing(index_elements=BLOB_KEYS)  # type: ignore[no-any-return]


# what a checkpoint written again under its key replaces (its key and thread stay)
CHECKPOINT_REPLACED = (
    "parent_checkpoint_id",
    "run_id",
    "type",
    "checkpoint",
    "metadata",
    "value_versions",
)


def replacing_checkpoint(stmt: Any) -> Any:
    """`stmt` (an INSERT into checkpoints) replacing the row already stored under its key."""
    return stmt.on_conflict_do_update(
        index_elements=CHECKPOINT_KEYS,
        set_={name: stmt.excluded[name] for name in CHECKPOINT_REPLACED},
    )


def blob_array_source(dialect: Dialect | str) -> Select[Any]:
    """A checkpoint's new channel values as rows, from parallel arrays (`blob_params`)."""
    rows = unnest_arrays(
        dialect,
        "blob_",
        {"channel": Text(), "version": Text(), "type": Text(), "blob": LargeBinary()},
    )
    return select(
        bindparam("blob_tenant_id", type_=Text()),
        bindparam("blob_thread_id", type_=Text()),
        bindparam("blob_checkpoint_ns", type_=Text()),
        rows.c.channel,
        rows.c.version,
        rows.c.type,
        rows.c.blob,
    )


def upsert_checkpoint(dialect: Dialect, *, with_blobs: bool = False) -> Insert:
    """Insert (or replace) one checkpoint row; its columns are bound by name.

    `with_blobs` (PostgreSQL only): the checkpoint's new channel values ride along as a
    data-modifying CTE, bound as parallel arrays `blob_channel`, `blob_version`, `blob_type`,
    `blob_blob` (see `blob_params`), so a checkpoint and its blobs are one statement, one
    round trip, atomic without BEGIN/COMMIT, and one cached shape whatever the blob count.
    """
    stmt = insert_for(dialect, checkpoints)
    stmt = replacing_checkpoint(stmt)
    if with_blobs:
        source = blob_array_source(dialect)
        new_blobs = insert_for(dialect, checkpoint_blobs).from_select(BLOB_COLUMNS, source)
        new_blobs = new_blobs.on_conflict_do_nothing(index_elements=BLOB_KEYS)
        stmt = stmt.add_cte(new_blobs.cte("new_blobs"))
    return stmt  # type: ignore[no-any-return]


def blob_params(key: Mapping[str, str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Parameters for `upsert_checkpoint(with_blobs=True)`'s blob CTE."""
    params: dict[str, Any] = {f"blob_{name}": value for name, value in key.items()}
    for column in ("channel", "version", "type", "blob"):
        params[f"blob_{column}"] = [row[column] for row in rows]
    return params


def insert_writes(dialect: Dialect) -> Insert:
    """Insert pending writes (executemany). Regular writes (idx >= 0) are kept as first
    written, so a retried task cannot duplicate them; special writes (error, interrupt,
    resume, scheduled: negative idx) replace the previous one, as langgraph's savers do."""
    stmt = insert_for(dialect, checkpoint_writes)
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=WRITE_KEYS,
        set_={name: stmt.excluded[name] for name in ("task_path", "channel", "type", "blob")},
        where=checkpoint_writes.c.idx < 0,
    )


def select_thread_headers(tenant_id: str, thread_ids: Sequence[str]) -> Select[Any]:
    """Structure (no state) of whole threads, for maintenance: ids, parents, value index."""
    return select(
        CP.thread_id,
        CP.checkpoint_ns,
        CP.checkpoint_id,
        CP.parent_checkpoint_id,
        CP.run_id,
        CP.metadata,
        CP.value_versions,
    ).where(CP.tenant_id == tenant_id, CP.thread_id.in_(list(thread_ids)))


def select_run_threads(tenant_id: str, run_ids: Sequence[str]) -> Select[Any]:
    """Threads holding checkpoints of the given runs."""
    return (
        select(CP.thread_id)
        .where(CP.tenant_id == tenant_id, CP.run_id.in_(list(run_ids)))
        .distinct()
    )


# --------------------------------------------------------------------------- deletes / copies


def delete_threads(table: Any, tenant_id: str, thread_ids: Sequence[str]) -> Delete:
    return delete(table).where(
        table.c.tenant_id == tenant_id, table.c.thread_id.in_(list(thread_ids))
    )


def delete_checkpoints(
    table: Any, tenant_id: str, thread_id: str, checkpoint_ns: str, ids: Sequence[str]
) -> Delete:
    """Delete rows of `checkpoints` or `checkpoint_writes` for the given checkpoint ids."""
    return delete(table).where(
        _in_thread(table, tenant_id, thread_id, checkpoint_ns),
        table.c.checkpoint_id.in_(list(ids)),
    )


def delete_blobs(
    tenant_id: str, thread_id: str, checkpoint_ns: str, channel: str, versions: Sequence[str]
) -> Delete:
    return delete(checkpoint_blobs).where(
        _in_thread(checkpoint_blobs, tenant_id, thread_id, checkpoint_ns),
        BL.channel == channel,
        BL.version.in_(list(versions)),
    )


def detach_parents(tenant_id: str, thread_id: str, checkpoint_ns: str, ids: Sequence[str]) -> Any:
    """Clear the parent link of kept checkpoints whose parent was pruned."""
    return (
        checkpoints.update()
        .where(
            _in_thread(checkpoints, tenant_id, thread_id, checkpoint_ns),
            CP.checkpoint_id.in_(list(ids)),
        )
        .values(parent_checkpoint_id=None)
    )


def count_checkpoints(tenant_id: str, thread_id: str) -> Select[Any]:
    """How many checkpoints the thread has (every namespace)."""
    return (
        select(func.count())
        .select_from(checkpoints)
        .where(CP.tenant_id == tenant_id, CP.thread_id == thread_id)
    )


def copy_thread_rows(table: Any, tenant_id: str, source: str, target: str) -> Insert:
    """INSERT ... SELECT every row of one thread under another thread id (same tenant)."""
    names = [c.name for c in table.columns]
    columns: list[ColumnElement[Any]] = [
        literal(target, String(255)).label("thread_id") if n == "thread_id" else table.c[n]
        for n in names
    ]
    source_rows = select(*columns).where(
        table.c.tenant_id == tenant_id, table.c.thread_id == source
    )
    return insert(table).from_select(names, source_rows)


TREE_COLUMNS = (
    CP.checkpoint_ns,
    CP.checkpoint_id,
    CP.parent_checkpoint_id,
    CP.metadata,
    CP.created_at,
)


def select_tree_page(tenant_id: str, thread_id: str, *, before: str | None, limit: int) -> Any:
    """The thread graph's own checkpoint headers, newest first, no blob columns; in primary
    key order, so a page costs the same at any thread length."""
    stmt = select(*TREE_COLUMNS).where(
        CP.tenant_id == tenant_id, CP.thread_id == thread_id, CP.checkpoint_ns == ""
    )
    if before is not None:
        stmt = stmt.where(CP.checkpoint_id < before)
    return stmt.order_by(CP.checkpoint_id.desc()).limit(limit)


def select_subgraph_window(
    tenant_id: str, thread_id: str, *, since: str | None, before: str | None, limit: int
) -> Any:
    """Subgraph checkpoint headers whose ids fall in a root page's window [since, before)."""
    stmt = select(*TREE_COLUMNS).where(
        CP.tenant_id == tenant_id, CP.thread_id == thread_id, CP.checkpoint_ns > ""
    )
    if since is not None:
        stmt = stmt.where(CP.checkpoint_id >= since)
    if before is not None:
        stmt = stmt.where(CP.checkpoint_id < before)
    return stmt.order_by(CP.checkpoint_ns, CP.checkpoint_id.desc()).limit(limit)


def select_write_tasks(
    tenant_id: str, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str]
) -> Any:
    """The (namespace, checkpoint, task path) of the writes stored against some checkpoints
    of one namespace: a primary-key range per id, however long the thread is."""
    return (
        select(WR.checkpoint_ns, WR.checkpoint_id, WR.task_path)
        .where(
            WR.tenant_id == tenant_id,
            WR.thread_id == thread_id,
            WR.checkpoint_ns == checkpoint_ns,
            WR.checkpoint_id.in_(list(checkpoint_ids)),
        )
        .distinct()
    )

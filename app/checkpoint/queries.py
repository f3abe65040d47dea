"""Pure statement builders for the checkpoint tables (no I/O; the saver executes them).

Every statement takes the tenant and filters on it: the tables' primary keys lead with
`tenant_id, thread_id, checkpoint_ns`, so each hot query is a primary-key probe or a range
scan inside one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Delete,
    Insert,
    Integer,
    LargeBinary,
    Select,
    String,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    null,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import Dialect

from app.db.dialect import insert_for, json_contains, json_pairs, unnest_arrays
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from app.db.types import JSONType

CP = checkpoints.c
BL = checkpoint_blobs.c
WR = checkpoint_writes.c

BLOB_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "channel", "version"]
CHECKPOINT_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id"]
WRITE_KEYS = ["tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]

# Kinds of rows in the values-and-writes union.
KIND_VALUE = "v"
KIND_WRITE = "w"
KIND_GUARD = "g"  # the caller's own row riding along (see `guard_rows`)
INLINE_MARKER = ""  # value_versions entry of a value kept inline (see codec.INLINE)

HEADER_COLUMNS = (
    CP.thread_id,
    CP.checkpoint_ns,
    CP.checkpoint_id,
    CP.parent_checkpoint_id,
    CP.type,
    CP.checkpoint,
    CP.metadata,
    CP.value_versions,
)


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


def upsert_checkpoint(dialect: Dialect, *, with_blobs: bool = False) -> Insert:
    """Insert (or replace) one checkpoint row; its columns are bound by name.

    `with_blobs` (PostgreSQL only): the checkpoint's new channel values ride along as a
    data-modifying CTE, bound as parallel arrays `blob_channel`, `blob_version`, `blob_type`,
    `blob_blob` (see `blob_params`), so a checkpoint and its blobs are one statement, one
    round trip, atomic without BEGIN/COMMIT, and one cached shape whatever the blob count.
    """
    stmt = insert_for(dialect, checkpoints)
    stmt = stmt.on_conflict_do_update(
        index_elements=CHECKPOINT_KEYS,
        set_={
            name: stmt.excluded[name]
            for name in (
                "parent_checkpoint_id",
                "run_id",
                "type",
                "checkpoint",
                "metadata",
                "value_versions",
            )
        },
    )
    if with_blobs:
        rows = unnest_arrays(
            dialect,
            "blob_",
            {"channel": Text(), "version": Text(), "type": Text(), "blob": LargeBinary()},
        )
        source = select(
            bindparam("blob_tenant_id", type_=Text()),
            bindparam("blob_thread_id", type_=Text()),
            bindparam("blob_checkpoint_ns", type_=Text()),
            rows.c.channel,
            rows.c.version,
            rows.c.type,
            rows.c.blob,
        )
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


# --------------------------------------------------------------------------- reads


def select_checkpoint(
    tenant_id: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
) -> Select[Any]:
    """One checkpoint by primary key, or the latest (first row of a backward index scan)."""
    stmt = select(*HEADER_COLUMNS).where(
        _in_thread(checkpoints, tenant_id, thread_id, checkpoint_ns)
    )
    if checkpoint_id is not None:
        return stmt.where(CP.checkpoint_id == checkpoint_id)
    return stmt.order_by(CP.checkpoint_id.desc()).limit(1)


def guard_rows(guard: Select[Any]) -> Select[Any]:
    """The caller's one-column query (a JSON column, e.g. the thread row's metadata) as rows
    of a get/list union: kind `g`, its value in `metadata`. It may bind `tenant_id` and
    `thread_id`, which take the checkpoint query's values. No row: the caller's row is
    missing, in the same round trip as the checkpoints."""
    (column,) = guard.selected_columns
    no_text = cast(null(), Text)
    rows: Any = guard.with_only_columns(
        literal(KIND_GUARD),
        no_text,
        no_text,
        no_text,
        no_text,
        no_text,
        cast(null(), Integer),
        no_text,
        cast(null(), LargeBinary),
        column,
        cast(null(), JSONType),
    )
    return rows  # type: ignore[no-any-return]


def select_tuple(
    dialect: Dialect, *, by_id: bool, guard: Select[Any] | None = None
) -> CompoundSelect[Any]:
    """`get_tuple` in one statement: the checkpoint row (a primary-key probe, or the first
    row of a backward index scan for the latest), then a primary-key probe per blob its
    `value_versions` references (never the thread's other blobs), then its pending writes.

    Binds `tenant_id`, `thread_id`, `checkpoint_ns` (and `checkpoint_id` when `by_id`).
    Joins match on the head row's own key columns, so each probe uses the whole primary key
    whatever the planner's statistics.
    """
    head = select(CP.tenant_id, *HEADER_COLUMNS).where(
        CP.tenant_id == bindparam("tenant_id"),
        CP.thread_id == bindparam("thread_id"),
        CP.checkpoint_ns == bindparam("checkpoint_ns"),
    )
    if by_id:
        head = head.where(CP.checkpoint_id == bindparam("checkpoint_id"))
    else:
        head = head.order_by(CP.checkpoint_id.desc()).limit(1)
    h = head.cte("head").c
    no_text = cast(null(), Text)
    no_json = cast(null(), JSONType)
    header = select(
        literal("h").label("kind"),
        h.checkpoint_id,
        h.parent_checkpoint_id,
        no_text.label("channel"),
        no_text.label("key"),
        no_text.label("task_path"),
        cast(null(), Integer).label("idx"),
        h.type,
        h.checkpoint.label("blob"),
        h.metadata,
        h.value_versions,
    )
    pairs = json_pairs(dialect, h.value_versions)

    def blob_column(column: Any) -> Any:
        # A correlated scalar subquery per referenced (channel, version): always a probe by
        # the whole primary key. A join here lets the planner hash the thread's blobs instead
        # (jsonb_each_text is estimated at 100 rows), which is what makes langgraph's
        # PostgreSQL saver slow down as a thread grows.
        return (
            select(column)
            .where(
                BL.tenant_id == h.tenant_id,
                BL.thread_id == h.thread_id,
                BL.checkpoint_ns == h.checkpoint_ns,
                BL.channel == pairs.c.key,
                BL.version == pairs.c.value,
            )
            .scalar_subquery()
        )

    values = (
        select(
            literal(KIND_VALUE),
            no_text,
            no_text,
            cast(pairs.c.key, Text),
            cast(pairs.c.value, Text),
            no_text,
            cast(null(), Integer),
            blob_column(BL.type),
            blob_column(BL.blob),
            no_json,
            no_json,
        )
        .select_from(h.checkpoint_id.table)
        .join(pairs, true())
        .where(pairs.c.value != INLINE_MARKER)
    )
    writes = select(
        literal(KIND_WRITE),
        no_text,
        no_text,
        WR.channel,
        WR.task_id,
        WR.task_path,
        WR.idx,
        WR.type,
        WR.blob,
        no_json,
        no_json,
    ).select_from(
        h.checkpoint_id.table.join(
            checkpoint_writes,
            and_(
                WR.tenant_id == h.tenant_id,
                WR.thread_id == h.thread_id,
                WR.checkpoint_ns == h.checkpoint_ns,
                WR.checkpoint_id == h.checkpoint_id,
            ),
        )
    )
    if guard is not None:
        return union_all(header, values, writes, guard_rows(guard))
    return union_all(header, values, writes)


def select_checkpoints(
    dialect: Dialect,
    tenant_id: str,
    *,
    thread_id: str | None,
    checkpoint_ns: str | None,
    checkpoint_id: str | None,
    metadata_filter: Mapping[str, Any] | None,
    before_id: str | None,
    limit: int | None,
) -> Select[Any]:
    """Checkpoints newest first, for `list`."""
    stmt = select(*HEADER_COLUMNS).where(CP.tenant_id == tenant_id)
    if thread_id is not None:
        stmt = stmt.where(CP.thread_id == thread_id)
    if checkpoint_ns is not None:
        stmt = stmt.where(CP.checkpoint_ns == checkpoint_ns)
    if checkpoint_id is not None:
        stmt = stmt.where(CP.checkpoint_id == checkpoint_id)
    if metadata_filter:
        stmt = stmt.where(json_contains(dialect, CP.metadata, dict(metadata_filter)))
    if before_id is not None:
        stmt = stmt.where(CP.checkpoint_id < before_id)
    stmt = stmt.order_by(CP.checkpoint_id.desc())
    if limit is not None:
        stmt = stmt.limit(limit)
    return stmt


def _referenced_blobs(dialect: Dialect, pg: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The distinct (channel, version) pairs a page `pg` of checkpoints references, and a
    function giving one column of the blob each pair names (a scalar subquery)."""
    pairs = json_pairs(dialect, pg.value_versions)
    distinct_pairs = (
        select(
            pg.tenant_id,
            pg.thread_id,
            pg.checkpoint_ns,
            cast(pairs.c.key, Text).label("channel"),
            cast(pairs.c.value, Text).label("version"),
        )
        .select_from(pg.value_versions.table)
        .join(pairs, true())
        .where(pairs.c.value != INLINE_MARKER)
        .distinct()
        .subquery("pairs")
    )
    dp = distinct_pairs.c

    def blob_column(column: Any) -> Any:
        return (
            select(column)
            .where(
                BL.tenant_id == dp.tenant_id,
                BL.thread_id == dp.thread_id,
                BL.checkpoint_ns == dp.checkpoint_ns,
                BL.channel == dp.channel,
                BL.version == dp.version,
            )
            .scalar_subquery()
        )

    return dp, blob_column


def select_list(
    dialect: Dialect, *, before: bool, guard: Select[Any] | None = None
) -> CompoundSelect[Any]:
    """A thread's newest checkpoints with their values and pending writes, in ONE statement
    (the common `list`: one thread and namespace, a limit, no metadata filter).

    Binds `tenant_id`, `thread_id`, `checkpoint_ns`, `limit` (and `before_id` when `before`).
    The page is the first `limit` rows of a backward index scan; each distinct (channel,
    version) its checkpoints reference is a primary-key probe, and its writes are one range
    scan over the page's ids. Rows come in the shape of `select_tuple`'s (`kind` h / v / w),
    unordered: header rows carry their rank in the page in `idx`; write rows carry their
    checkpoint id in `checkpoint_id` and the task id in `key`.
    """
    head = select(CP.tenant_id, *HEADER_COLUMNS).where(
        CP.tenant_id == bindparam("tenant_id"),
        CP.thread_id == bindparam("thread_id"),
        CP.checkpoint_ns == bindparam("checkpoint_ns"),
    )
    if before:
        head = head.where(CP.checkpoint_id < bindparam("before_id"))
    head = head.order_by(CP.checkpoint_id.desc()).limit(bindparam("limit", type_=Integer))
    pg = head.cte("page").c
    no_text = cast(null(), Text)
    no_json = cast(null(), JSONType)
    header = select(
        literal("h").label("kind"),
        pg.checkpoint_id,
        pg.parent_checkpoint_id,
        no_text.label("channel"),
        no_text.label("key"),
        no_text.label("task_path"),
        # the page's order, as the database sorted it (rows of a UNION come unordered)
        func.row_number().over(order_by=pg.checkpoint_id.desc()).label("idx"),
        pg.type,
        pg.checkpoint.label("blob"),
        pg.metadata,
        pg.value_versions,
    )
    dp, blob_column = _referenced_blobs(dialect, pg)

    values = select(
        literal(KIND_VALUE),
        no_text,
        no_text,
        dp.channel,
        dp.version,
        no_text,
        cast(null(), Integer),
        blob_column(BL.type),
        blob_column(BL.blob),
        no_json,
        no_json,
    )
    writes = select(
        literal(KIND_WRITE),
        WR.checkpoint_id,
        no_text,
        WR.channel,
        WR.task_id,
        WR.task_path,
        WR.idx,
        WR.type,
        WR.blob,
        no_json,
        no_json,
    ).where(
        WR.tenant_id == bindparam("tenant_id"),
        WR.thread_id == bindparam("thread_id"),
        WR.checkpoint_ns == bindparam("checkpoint_ns"),
        # the page is a contiguous id range of this thread and namespace: a range scan of
        # the writes index (an IN over the page was planned as a scan of all the thread's
        # writes, filtered). Writes of ids outside the page cannot fall in the range.
        WR.checkpoint_id.between(
            select(func.min(pg.checkpoint_id)).scalar_subquery(),
            select(func.max(pg.checkpoint_id)).scalar_subquery(),
        ),
    )
    if guard is not None:
        return union_all(header, values, writes, guard_rows(guard))
    return union_all(header, values, writes)


def select_page(dialect: Dialect) -> CompoundSelect[Any]:
    """The values and pending writes of one page of `list`, in one statement.

    Binds `tenant_id`, `thread_id`, `checkpoint_ns` and the page's id range `lo`..`hi` (its
    last and first rows as the database sorted them). The page's checkpoints are one range
    scan; each distinct (channel, version) they reference is then a primary-key probe (scalar
    subqueries: an IN list on `version` was planned as a filter over all of the channel's
    blobs on unanalyzed tables, which made listing quadratic). Writes come from the same id
    range; the caller keeps those of the page's checkpoints.

    Value rows carry the version in `key`; write rows carry `checkpoint_id|task_id`.
    """
    page_filter = (
        CP.tenant_id == bindparam("tenant_id"),
        CP.thread_id == bindparam("thread_id"),
        CP.checkpoint_ns == bindparam("checkpoint_ns"),
        CP.checkpoint_id.between(bindparam("lo"), bindparam("hi")),
    )
    page = select(CP.tenant_id, CP.thread_id, CP.checkpoint_ns, CP.value_versions).where(
        *page_filter
    )
    pg = page.cte("page").c
    dp, blob_column = _referenced_blobs(dialect, pg)

    values = select(
        literal(KIND_VALUE).label("kind"),
        dp.channel.label("channel"),
        dp.version.label("key"),
        cast(null(), Text).label("task_path"),
        cast(null(), Integer).label("idx"),
        blob_column(BL.type).label("type"),
        blob_column(BL.blob).label("blob"),
    )
    writes = select(
        literal(KIND_WRITE),
        WR.channel,
        WR.checkpoint_id + literal("|") + WR.task_id,
        WR.task_path,
        WR.idx,
        WR.type,
        WR.blob,
    ).where(
        WR.tenant_id == bindparam("tenant_id"),
        WR.thread_id == bindparam("thread_id"),
        WR.checkpoint_ns == bindparam("checkpoint_ns"),
        WR.checkpoint_id.between(bindparam("lo"), bindparam("hi")),
    )
    return union_all(values, writes)


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

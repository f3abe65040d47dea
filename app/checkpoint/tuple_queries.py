"""Statement builders for the get/list reads of the checkpointer (no I/O).

Each read returns a checkpoint (or a page of them) together with the channel values it
references and its pending writes as ONE union of uniformly shaped rows, told apart by
`kind`; app/checkpoint/tuple_rows.py turns them back into `CheckpointTuple`s. The write
path and maintenance statements are in `queries`.

Every statement filters on the tenant: the tables' primary keys lead with
`tenant_id, thread_id, checkpoint_ns`, so each probe stays inside one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Integer,
    LargeBinary,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal,
    null,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import Dialect

from app.db.dialect import json_contains, json_pairs
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from app.db.types import JSONType

CP = checkpoints.c
BL = checkpoint_blobs.c
WR = checkpoint_writes.c

# Kinds of rows in the values-and-writes union.
KIND_HEADER = "h"  # the checkpoint row itself
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
        literal(KIND_HEADER).label("kind"),
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
        literal(KIND_HEADER).label("kind"),
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

"""DeltaChannel history in one statement: a recursive walk up the parent chain (the pure
builder; app/checkpoint/delta.py turns its rows into histories).

`WITH RECURSIVE chain` starts at the target checkpoint and follows `parent_checkpoint_id`,
one primary-key probe per step, carrying for each requested channel whether its walk is
still open. A channel's walk closes at the nearest ancestor whose `value_versions` holds the
channel (its seed: a `_DeltaSnapshot` blob, or a plain value); the recursion stops once every
channel is closed or the root is reached. The same statement then returns, as one UNION ALL,
the open ancestors' writes to each channel and each channel's seed, so the whole history is
one round trip whatever the depth. The target's own writes are pending for the next step and
are excluded, as `BaseCheckpointSaver.get_delta_channel_history` specifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    CompoundSelect,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
)

from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints

CP = checkpoints.c
BL = checkpoint_blobs.c
WR = checkpoint_writes.c

KIND_WRITE = "w"
KIND_BLOB_SEED = "b"
KIND_INLINE_SEED = "i"
# the statement's columns, in order: app/checkpoint/delta.py unpacks its rows by position
HISTORY_COLUMNS = ("kind", "ch_index", "depth", "task_path", "task_id", "idx", "type", "blob")


def build_history_query(channel_count: int, *, by_id: bool) -> CompoundSelect[Any]:
    """The one statement answering `get_delta_channel_history` (see the module docstring).

    Binds `tenant_id`, `thread_id`, `checkpoint_ns`, `checkpoint_id` (when `by_id`; else the
    latest checkpoint) and `ch_0` ... `ch_<n-1>`; see `history_params`. Built once per shape
    and reused, so SQLAlchemy's compiled cache and the driver's prepared statement apply.
    """
    tenant_id = bindparam("tenant_id", type_=String())
    thread_id = bindparam("thread_id", type_=String())
    checkpoint_ns = bindparam("checkpoint_ns", type_=String())
    channels = [bindparam(f"ch_{i}", type_=String()) for i in range(channel_count)]
    # the same names as JSON object keys (SQLite renders them as a '$."name"' path)
    keys = [bindparam(f"key_{i}", type_=JSON.JSONStrIndexType()) for i in range(channel_count)]
    in_thread = and_(
        CP.tenant_id == tenant_id, CP.thread_id == thread_id, CP.checkpoint_ns == checkpoint_ns
    )
    target: Any
    if by_id:
        target = bindparam("checkpoint_id", type_=String())
    else:
        target = select(func.max(CP.checkpoint_id)).where(in_thread).scalar_subquery()

    def version_of(i: int) -> Any:
        return cast(CP.value_versions[keys[i]].as_string(), Text).label(f"ver_{i}")

    # The chain carries its own tenant / thread / namespace and every join below matches on
    # those columns rather than on constants: the joined table then has no restriction of its
    # own, so even on a never-analyzed table PostgreSQL probes the primary key per chain row
    # instead of scanning the thread's prefix for each one.
    anchor = select(
        CP.tenant_id,
        CP.thread_id,
        CP.checkpoint_ns,
        CP.checkpoint_id,
        CP.parent_checkpoint_id,
        literal(0, Integer).label("depth"),
        *[literal(1, Integer).label(f"open_{i}") for i in range(len(channels))],
        *[version_of(i) for i in range(len(channels))],
    ).where(in_thread, CP.checkpoint_id == target)
    chain = anchor.cte("chain", recursive=True)
    ch = chain.c

    def still_open(i: int) -> Any:
        # open at the child and not closed by the child's own stored value (the target's own
        # value, at depth 0, never closes a walk)
        closes = and_(ch.depth >= 1, ch[f"ver_{i}"].is_not(None))
        return case((and_(ch[f"open_{i}"] == 1, ~closes), 1), else_=0)

    parent = checkpoints.alias("parent")
    step = (
        select(
            parent.c.tenant_id,
            parent.c.thread_id,
            parent.c.checkpoint_ns,
            parent.c.checkpoint_id,
            parent.c.parent_checkpoint_id,
            (ch.depth + 1).label("depth"),
            *[still_open(i).label(f"open_{i}") for i in range(len(channels))],
            *[
                cast(parent.c.value_versions[keys[i]].as_string(), Text).label(f"ver_{i}")
                for i in range(len(channels))
            ],
        )
        .select_from(
            chain.join(
                parent,
                and_(
                    parent.c.tenant_id == ch.tenant_id,
                    parent.c.thread_id == ch.thread_id,
                    parent.c.checkpoint_ns == ch.checkpoint_ns,
                    parent.c.checkpoint_id == ch.parent_checkpoint_id,
                ),
            )
        )
        .where(or_(*[still_open(i) == 1 for i in range(len(channels))]))
    )
    chain = chain.union_all(step)
    ch = chain.c

    arms = []
    for i, channel in enumerate(channels):
        on_path = and_(ch.depth >= 1, ch[f"open_{i}"] == 1)
        arms.append(
            select(
                literal(KIND_WRITE).label("kind"),
                literal(i, Integer).label("ch_index"),
                ch.depth,
                WR.task_path,
                WR.task_id,
                WR.idx,
                WR.type,
                WR.blob,
            )
            .select_from(
                chain.join(
                    checkpoint_writes,
                    and_(
                        WR.tenant_id == ch.tenant_id,
                        WR.thread_id == ch.thread_id,
                        WR.checkpoint_ns == ch.checkpoint_ns,
                        WR.checkpoint_id == ch.checkpoint_id,
                        WR.channel == channel,
                    ),
                )
            )
            .where(on_path)
        )
        # The seed (one row per channel at most): the stored blob, or for a value kept inline
        # the ancestor's checkpoint body. Scalar subqueries, so each is one probe by the whole
        # primary key whatever the planner's statistics.
        version = ch[f"ver_{i}"]
        in_chain_thread = (
            BL.tenant_id == ch.tenant_id,
            BL.thread_id == ch.thread_id,
            BL.checkpoint_ns == ch.checkpoint_ns,
            BL.channel == channel,
            BL.version == version,
        )
        seed_cp = checkpoints.alias(f"seed_{i}")
        in_chain_row = (
            seed_cp.c.tenant_id == ch.tenant_id,
            seed_cp.c.thread_id == ch.thread_id,
            seed_cp.c.checkpoint_ns == ch.checkpoint_ns,
            seed_cp.c.checkpoint_id == ch.checkpoint_id,
        )
        inline = version == ""
        arms.append(
            select(
                case((inline, KIND_INLINE_SEED), else_=KIND_BLOB_SEED).label("kind"),
                literal(i, Integer).label("ch_index"),
                ch.depth,
                cast(null(), Text).label("task_path"),
                cast(null(), Text).label("task_id"),
                cast(null(), Integer).label("idx"),
                case(
                    (inline, select(seed_cp.c.type).where(*in_chain_row).scalar_subquery()),
                    else_=select(BL.type).where(*in_chain_thread).scalar_subquery(),
                ).label("type"),
                case(
                    (inline, select(seed_cp.c.checkpoint).where(*in_chain_row).scalar_subquery()),
                    else_=select(BL.blob).where(*in_chain_thread).scalar_subquery(),
                ).label("blob"),
            )
            .select_from(chain)
            .where(on_path, version.is_not(None))
        )
    return union_all(*arms)


def history_params(
    tenant_id: str,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    channels: Sequence[str],
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        **{f"ch_{i}": channel for i, channel in enumerate(channels)},
        **{f"key_{i}": channel for i, channel in enumerate(channels)},
    }
    if checkpoint_id is not None:
        params["checkpoint_id"] = checkpoint_id
    return params

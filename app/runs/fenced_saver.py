"""A run attempt's view of the checkpointer: every checkpoint and pending write is fenced.

The executor hands the graph `fenced(saver, token, on_refused)` instead of the saver itself.
Reads are the saver's own; the two writes a graph makes (a checkpoint with its new channel
values, a task's pending writes) apply only if, in the same statement (PostgreSQL) or the same
write transaction (SQLite), the runs row still names this attempt and is running. A refused
write changes nothing, counts in `graphkeep_run_fenced_writes_refused_total`, calls
`on_refused` (the executor stops the attempt at once: langgraph may have raised it in a
background task) and raises `AttemptSuperseded`.

PostgreSQL: one statement, one round trip, as the plain saver's put. The owner row is read
`FOR SHARE`: a reaper, cancel or settle updating it waits for this write to commit (or this
write waits for theirs and then sees the row changed), so a write is either before the
attempt lost the run or refused; never after.
SQLite: each statement is conditional on the owner too, in one BEGIN IMMEDIATE unit (the
database's single write lock held across it), then ownership is read once more: a token that
lost its run never owns it again (attempts only grow), so if it still owns the run now the
unit saw it owning and wrote; if not, the write is reported refused (whatever it did was done
while the attempt still owned the run).

The public `SQLSaver` keeps its plain `BaseCheckpointSaver` behaviour; only this view fences.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import Integer, LargeBinary, Select, Text, bindparam, exists, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.checkpoint import queries
from app.checkpoint.saver import SQLSaver
from app.db.dialect import insert_for, unnest_arrays
from app.db.direct import DirectStatement
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints, runs
from app.runs.fencing import AttemptSuperseded, FencingToken, fence_params, owns_run_bound

_CHECKPOINT_COLUMNS = [c.name for c in checkpoints.columns]
_WRITE_ROW_COLUMNS = {
    "task_id": Text(),
    "task_path": Text(),
    "idx": Integer(),
    "channel": Text(),
    "type": Text(),
    "blob": LargeBinary(),
}
_WRITE_KEY_COLUMNS = ("tenant_id", "thread_id", "checkpoint_ns", "checkpoint_id")


def _owner() -> Any:
    """The owning runs row, share-locked (see the module docstring)."""
    return select(runs.c.run_id).where(owns_run_bound()).with_for_update(read=True).cte("owner")


def _put_statement() -> Select[Any]:
    """PostgreSQL: checkpoint + new blobs, each conditional on the owner; returns the owner
    count (0: refused, nothing written)."""
    owner = _owner()
    owned = exists(select(owner.c.run_id))
    values = select(
        *[bindparam(name, type_=checkpoints.c[name].type) for name in _CHECKPOINT_COLUMNS]
    ).where(owned)
    put = insert_for("postgresql", checkpoints).from_select(_CHECKPOINT_COLUMNS, values)
    put = put.on_conflict_do_update(
        index_elements=queries.CHECKPOINT_KEYS,
        set_={
            name: put.excluded[name]
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
    rows = unnest_arrays(
        "postgresql",
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
    ).where(owned)
    blobs = insert_for("postgresql", checkpoint_blobs).from_select(queries.BLOB_COLUMNS, source)
    blobs = blobs.on_conflict_do_nothing(index_elements=queries.BLOB_KEYS)
    return (
        select(func.count().label("owned"))
        .select_from(owner)
        .add_cte(put.cte("fenced_put"), blobs.cte("fenced_blobs"))
    )


def _writes_statement() -> Select[Any]:
    """PostgreSQL: a task's pending writes as parallel arrays, conditional on the owner."""
    owner = _owner()
    rows = unnest_arrays("postgresql", "w_", _WRITE_ROW_COLUMNS)
    source = select(
        *[bindparam(name, type_=Text()) for name in _WRITE_KEY_COLUMNS],
        *[rows.c[name] for name in _WRITE_ROW_COLUMNS],
    ).where(exists(select(owner.c.run_id)))
    ins = insert_for("postgresql", checkpoint_writes).from_select(
        [*_WRITE_KEY_COLUMNS, *_WRITE_ROW_COLUMNS], source
    )
    ins = ins.on_conflict_do_update(  # as queries.insert_writes: special writes replace
        index_elements=queries.WRITE_KEYS,
        set_={name: ins.excluded[name] for name in ("task_path", "channel", "type", "blob")},
        where=checkpoint_writes.c.idx < 0,
    )
    return select(func.count().label("owned")).select_from(owner).add_cte(ins.cte("fenced_w"))


def _sqlite_statements() -> tuple[Any, Any, Any, Any]:
    """SQLite: checkpoint, blobs and writes inserts, each conditional on the owner (bound by
    name, executemany), and the owner check."""
    owned = exists(select(runs.c.run_id).where(owns_run_bound()))

    def conditional(table: Any, names: list[str]) -> Any:
        values = select(*[bindparam(n, type_=table.c[n].type) for n in names]).where(owned)
        return insert_for("sqlite", table).from_select(names, values)

    put = conditional(checkpoints, _CHECKPOINT_COLUMNS)
    put = put.on_conflict_do_update(
        index_elements=queries.CHECKPOINT_KEYS,
        set_={
            name: put.excluded[name]
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


# Compiled once per engine (views are made per run attempt).
_PREPARED: weakref.WeakKeyDictionary[AsyncEngine, tuple[DirectStatement, ...]] = (
    weakref.WeakKeyDictionary()
)


class FencedSaver(SQLSaver):
    """`SQLSaver` whose writes count only while `token` owns its run (module docstring)."""

    token: FencingToken
    on_refused: Callable[[AttemptSuperseded], None]

    async def _store_checkpoint(
        self, key: dict[str, str], row: dict[str, Any], blob_rows: list[dict[str, Any]]
    ) -> None:
        fence = fence_params(self.token)
        if self._one_statement:
            put, _ = self._prepared()
            params = {**row, **queries.blob_params(key, blob_rows), **fence}
            await self._check(await self._direct.fetch(put, params), "checkpoint")
            return
        put, blobs, _, check = self._prepared()
        await self._direct.write(
            (blobs, [{**r, **fence} for r in blob_rows]), (put, [{**row, **fence}])
        )
        await self._check(await self._direct.fetch(check, fence), "checkpoint")

    async def _store_writes(self, rows: list[dict[str, Any]]) -> None:
        if self._one_statement:
            _, writes = self._prepared()
            # one statement may not upsert a key twice: keep the last special write of a
            # key (it replaces), the first regular one (kept as first written)
            unique: dict[int, dict[str, Any]] = {}
            for r in rows:
                if r["idx"] < 0 or r["idx"] not in unique:
                    unique[r["idx"]] = r
            kept = list(unique.values())
            params: dict[str, Any] = {name: kept[0][name] for name in _WRITE_KEY_COLUMNS}
            for name in _WRITE_ROW_COLUMNS:
                params[f"w_{name}"] = [r[name] for r in kept]
            params.update(fence_params(self.token))
            await self._check(await self._direct.fetch(writes, params), "writes")
            return
        fence = fence_params(self.token)
        _, _, writes, check = self._prepared()
        await self._direct.write((writes, [{**r, **fence} for r in rows]))
        await self._check(await self._direct.fetch(check, fence), "writes")

    def _prepared(self) -> tuple[DirectStatement, ...]:
        prepared = _PREPARED.get(self.engine)
        if prepared is None:
            prepare = self._key_statement
            if self._one_statement:
                prepared = (prepare(_put_statement()), prepare(_writes_statement()))
            else:
                prepared = tuple(prepare(statement) for statement in _sqlite_statements())
            _PREPARED[self.engine] = prepared
        return prepared

    async def _check(self, rows: list[Any], what: str) -> None:
        if not rows or not rows[0].owned:
            self._refuse(what)

    def _refuse(self, what: str) -> None:
        error = AttemptSuperseded(self.token, what)
        metrics.count_fenced_refusal(what)
        self.on_refused(error)
        raise error


def fenced(
    saver: SQLSaver, token: FencingToken, on_refused: Callable[[AttemptSuperseded], None]
) -> FencedSaver:
    """A view of `saver` (same engine, tenant, serializer) whose writes are fenced by `token`."""
    view = FencedSaver.__new__(FencedSaver)
    view.__dict__.update(vars(saver))
    view.token = token
    view.on_refused = on_refused
    return view

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

The statements are built in app/runs/attempt_queries.py. The public `SQLSaver` keeps its
plain `BaseCheckpointSaver` behaviour; only this view fences.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from app import metrics
from app.checkpoint import queries
from app.checkpoint.saver import SQLSaver
from app.db.direct_statement import DirectStatement
from app.runs.attempt_queries import (
    WRITE_KEY_COLUMNS,
    WRITE_ROW_COLUMNS,
    fenced_put,
    fenced_sqlite_statements,
    fenced_writes,
)
from app.runs.fencing import AttemptSuperseded, FencingToken, fence_params


def _sqlite_statement(at: int) -> Any:
    return fenced_sqlite_statements()[at]


# per dialect family: PostgreSQL's one-statement put and writes; SQLite's put, blobs, writes
# and owner check
_BUILDERS: dict[bool, tuple[Callable[[], Any], ...]] = {
    True: (fenced_put, fenced_writes),
    False: tuple(functools.partial(_sqlite_statement, at) for at in range(4)),
}


class FencedSaver(SQLSaver):
    """`SQLSaver` whose writes count only while `token` owns its run (module docstring)."""

    token: FencingToken
    on_refused: Callable[[AttemptSuperseded], None]
    # the fenced statements, compiled once by the saver's executor, looked up once per view
    statements: tuple[DirectStatement, ...]

    async def _store_checkpoint(
        self, key: dict[str, str], row: dict[str, Any], blob_rows: list[dict[str, Any]]
    ) -> None:
        fence = fence_params(self.token)
        if self._one_statement:
            put, _ = self.statements
            params = {**row, **queries.blob_params(key, blob_rows), **fence}
            await self._check(await self._direct.fetch(put, params), "checkpoint")
            return
        put, blobs, _, check = self.statements
        await self._direct.write(
            (blobs, [{**r, **fence} for r in blob_rows]), (put, [{**row, **fence}])
        )
        await self._check(await self._direct.fetch(check, fence), "checkpoint")

    async def _store_writes(self, rows: list[dict[str, Any]]) -> None:
        if self._one_statement:
            _, writes = self.statements
            # one statement may not upsert a key twice: keep the last special write of a
            # key (it replaces), the first regular one (kept as first written)
            unique: dict[int, dict[str, Any]] = {}
            for r in rows:
                if r["idx"] < 0 or r["idx"] not in unique:
                    unique[r["idx"]] = r
            kept = list(unique.values())
            params: dict[str, Any] = {name: kept[0][name] for name in WRITE_KEY_COLUMNS}
            for name in WRITE_ROW_COLUMNS:
                params[f"w_{name}"] = [r[name] for r in kept]
            params.update(fence_params(self.token))
            await self._check(await self._direct.fetch(writes, params), "writes")
            return
        fence = fence_params(self.token)
        _, _, writes, check = self.statements
        await self._direct.write((writes, [{**r, **fence} for r in rows]))
        await self._check(await self._direct.fetch(check, fence), "writes")

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
    view.statements = tuple(
        saver._direct.prepared(("fenced", at), build, session_settings=False)
        for at, build in enumerate(_BUILDERS[saver._one_statement])
    )
    return view

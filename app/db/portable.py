"""The portable path: the saver's and the Store's units of work on SQLAlchemy Core.

`PortableExecutor` takes the same `DirectStatement`s and steps as `app.db.direct.DirectExecutor`
and runs each statement with `AsyncConnection.execute` through `app.db.access` (the reader and
the transaction helper every domain uses), so SQLAlchemy compiles, processes and executes
exactly as anywhere else. It is what the fast path is measured against
(bench/checkpoint_bench.py, bench/store_bench.py `--portable`) and checked against
(tests/integration/test_direct_vs_portable.py), and a saver or Store built with it runs on
Core alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import ClauseElement

from app.db.access import read, transaction
from app.db.direct_statement import DirectStatement, Step


class PortableExecutor:
    """`DirectExecutor`'s interface (prepare, write, fetch, session) on SQLAlchemy Core."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._prepared: dict[Hashable, DirectStatement] = {}

    def prepare(
        self, statement: ClauseElement, raw: Collection[str] = (), *, session_settings: bool = True
    ) -> DirectStatement:
        return DirectStatement(statement, self._engine, raw, session_settings=session_settings)

    def prepared(self, key: Hashable, build: Callable[[], ClauseElement]) -> DirectStatement:
        found = self._prepared.get(key)
        if found is None:
            found = self._prepared[key] = self.prepare(build())
        return found

    async def write(self, *steps: Step) -> None:
        """The steps in one transaction (one autocommitted statement on PostgreSQL when the
        unit is a single row of a single statement)."""
        work = [(statement, rows) for statement, rows in steps if rows]
        if not work:
            return
        single = len(work) == 1 and len(work[0][1]) == 1
        async with transaction(self._engine, one_statement=single) as conn:
            for statement, rows in work:
                await _execute(conn, statement, rows)

    async def fetch(self, query: DirectStatement, params: Mapping[str, Any]) -> list[Any]:
        async with read(self._engine) as conn:
            return await _execute(conn, query, [params])

    @asynccontextmanager
    async def session(self) -> AsyncIterator[PortableExecutor]:
        """Units of work in a row (each on its own connection: a read connection is
        autocommit, so it cannot also carry an atomic write)."""
        yield self


async def _execute(
    conn: AsyncConnection, statement: DirectStatement, rows: Sequence[Mapping[str, Any]]
) -> list[Any]:
    if statement.raw:
        # binds the caller already encoded for the driver (e.g. the Store's sealed JSON
        # text) must not pass their type's processor again: the compiled SQL with the
        # driver's arguments, still through the Connection
        args = [tuple(statement.args(row)) for row in rows]
        result = await conn.exec_driver_sql(statement.sql, args if len(args) > 1 else args[0])
    else:
        result = await conn.execute(statement.statement, list(rows) if len(rows) > 1 else rows[0])
    return list(result.all()) if result.returns_rows else []

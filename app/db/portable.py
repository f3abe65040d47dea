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

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.access import read, transaction
from app.db.direct_statement import DirectStatement, Preparer, Step


class PortableExecutor(Preparer):
    """`DirectExecutor`'s interface (prepare, write, fetch, session) on SQLAlchemy Core."""

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

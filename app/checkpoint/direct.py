"""The saver's hot path: pre-compiled statements run on the pooled driver connection.

A checkpoint put, a batch of pending writes and a get are each a fixed statement shape, so
most of their cost used to be SQLAlchemy's per-execute work (execution context, parameter and
result processing objects, cursor adaptation), and on SQLite one thread hop per step of
aiosqlite (BEGIN, each statement, fetch, COMMIT). Here each statement is compiled once by the
engine's own dialect (same SQL, same bind and result processors, so values are encoded and
decoded exactly as SQLAlchemy would) and run on the connection the engine's pool checked out:

- PostgreSQL (asyncpg): one autocommitted statement through asyncpg's prepared-statement
  cache, one round trip, committed when it returns; a batch of rows is pipelined and atomic
  (asyncpg runs it in one implicit transaction ending at its single Sync).
- SQLite (aiosqlite): the whole unit of work (BEGIN IMMEDIATE, statements, COMMIT, or one
  read) in ONE hop to the connection's worker thread; a failure rolls back before returning.

`before_cursor_execute` listeners are told of each statement. Driver errors come back as
the `DBAPIError`s SQLAlchemy would raise, and a connection the error broke is invalidated,
so the pool never hands it out again.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.util import greenlet_spawn

_SUPPLIED = object()  # marks a bind whose value comes with each call

# (statement, rows of parameters): one step of a write; each row runs the statement once
Step = tuple["DirectStatement", Sequence[Mapping[str, Any]]]


class DirectStatement:
    """One statement compiled for the engine's dialect, with its positional bind order, bind
    processors and (for queries) result processors and column names."""

    def __init__(self, statement: ClauseElement, engine: AsyncEngine) -> None:
        dialect = engine.dialect
        compiled: Any = statement.compile(dialect=dialect)  # a SQLCompiler
        if compiled.positiontup is None:
            raise ValueError("DirectStatement needs a positional paramstyle")
        self.sql = str(compiled)
        processors: Mapping[str, Callable[[Any], Any]] = compiled._bind_processors
        # (name, processor, constant): a bind the caller supplies, or a literal the statement
        # itself carries (e.g. the `idx < 0` of the writes upsert), processed once here
        self._binds: list[tuple[str, Callable[[Any], Any] | None, Any]] = []
        for name in compiled.positiontup:
            bind = compiled.binds[name]
            process = processors.get(name)
            if bind.required or bind.callable is not None:
                self._binds.append((name, process, _SUPPLIED))
            else:
                constant = bind.value if process is None else process(bind.value)
                self._binds.append((name, None, constant))
        columns = list(getattr(statement, "selected_columns", []))
        self._row_type: Any = namedtuple("DirectRow", [c.key for c in columns])  # type: ignore[misc]
        self._results: list[Callable[[Any], Any] | None] = [
            c.type._cached_result_processor(dialect, None) for c in columns
        ]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """Positional driver arguments for one row of named parameters."""
        return [
            constant
            if constant is not _SUPPLIED
            else params[name]
            if process is None
            else process(params[name])
            for name, process, constant in self._binds
        ]

    def rows(self, raw: Sequence[Sequence[Any]]) -> list[Any]:
        """Driver rows as named tuples, each value through its type's result processor."""
        processors = self._results
        if not any(processors):
            return [self._row_type(*row) for row in raw]
        return [
            self._row_type(
                *[v if p is None else p(v) for p, v in zip(processors, row, strict=True)]
            )
            for row in raw
        ]


class DirectExecutor:
    """Runs `DirectStatement`s on connections of an engine opened with the saver's
    autocommit options (PostgreSQL: AUTOCOMMIT; SQLite: no automatic BEGIN)."""

    def __init__(self, autocommit_engine: AsyncEngine) -> None:
        self._engine = autocommit_engine
        self._dialect = autocommit_engine.dialect
        self._sqlite = self._dialect.name == "sqlite"
        if not self._sqlite and self._dialect.driver != "asyncpg":
            raise ValueError("DirectExecutor runs on asyncpg or aiosqlite")

    def prepare(self, statement: ClauseElement) -> DirectStatement:
        return DirectStatement(statement, self._engine)

    async def write(self, *steps: Step) -> None:
        """Run the steps as one atomic unit, committed when this returns.

        PostgreSQL takes one step (one statement: its rows are one pipelined, atomic batch);
        SQLite runs any number in one BEGIN IMMEDIATE ... COMMIT.
        """
        if not self._sqlite and len(steps) != 1:
            raise ValueError("on PostgreSQL a direct write is one statement")
        work = [(s, [s.args(row) for row in rows]) for s, rows in steps if rows]
        if work:
            await self._run(work, None)

    async def fetch(self, query: DirectStatement, params: Mapping[str, Any]) -> list[Any]:
        """Rows of one query (named tuples), outside any transaction."""
        raw: list[Any] = []
        await self._run([(query, [query.args(params)])], raw)
        return query.rows(raw)

    async def _run(self, work: list[tuple[DirectStatement, list[list[Any]]]], out: Any) -> None:
        announce = self._engine.sync_engine.dispatch.before_cursor_execute
        if announce:  # listeners (tracing, statement counting) see every statement
            async with self._engine.connect() as conn:
                for statement, rows in work:
                    many = len(rows) > 1
                    announce(conn.sync_connection, None, statement.sql, rows, None, many)
                await self._on(await conn.get_raw_connection(), work, out)
            return
        # No listeners: take the pooled DBAPI connection itself (pool events such as the idle
        # ping still run), skipping the Connection object and its isolation-level switching;
        # the driver connection is outside any transaction here, i.e. autocommit.
        pooled = await self._engine.raw_connection()
        try:
            await self._on(pooled, work, out)
        finally:
            await greenlet_spawn(pooled.close)

    async def _on(
        self,
        pooled: PoolProxiedConnection,
        work: list[tuple[DirectStatement, list[list[Any]]]],
        out: Any,
    ) -> None:
        adapter, driver = pooled.dbapi_connection, pooled.driver_connection
        try:
            if self._sqlite:
                sql_conn = driver._conn  # type: ignore[union-attr]
                await driver._execute(_sqlite_unit, sql_conn, work, out)  # type: ignore[union-attr]
            else:
                await _asyncpg_unit(driver, work, out)
        except Exception as error:
            translated = _translate(adapter, error)
            if not isinstance(translated, self._dialect.loaded_dbapi.Error):
                raise
            broken = self._dialect.is_disconnect(translated, adapter, None)
            if broken:  # never hand this connection out again
                await greenlet_spawn(pooled.invalidate, translated)
            raise DBAPIError.instance(
                work[-1][0].sql,
                None,
                translated,
                self._dialect.loaded_dbapi.Error,
                hide_parameters=True,
                connection_invalidated=broken,
                dialect=self._dialect,
            ) from error


async def _asyncpg_unit(
    driver: Any, work: list[tuple[DirectStatement, list[list[Any]]]], out: Any
) -> None:
    ((statement, rows),) = work
    if out is not None:
        out.extend(await driver.fetch(statement.sql, *rows[0]))
    elif len(rows) == 1:
        await driver.execute(statement.sql, *rows[0])
    else:
        await driver.executemany(statement.sql, rows)


def _sqlite_unit(
    db: sqlite3.Connection, work: list[tuple[DirectStatement, list[list[Any]]]], out: Any
) -> None:
    """Runs in the aiosqlite worker thread (the connection is in driver-autocommit mode)."""
    if out is not None:
        ((statement, rows),) = work
        out.extend(db.execute(statement.sql, rows[0]).fetchall())
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement, rows in work:
            if len(rows) == 1:
                db.execute(statement.sql, rows[0])
            else:
                db.executemany(statement.sql, rows)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _translate(adapter: Any, error: Exception) -> Exception:
    """The adapter's own translation of a driver error to its DBAPI class."""
    try:
        adapter._handle_exception(error)
    except Exception as translated:
        return translated
    return error  # pragma: no cover - the adapter always raises

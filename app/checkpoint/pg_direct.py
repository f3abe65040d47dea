"""PostgreSQL hot path: pre-compiled write statements run on the pooled asyncpg connection.

A checkpoint put is one autocommitted statement, so most of its cost used to be SQLAlchemy's
per-execute work (execution context, parameter processing, result setup), not the database.
Here each statement is compiled once by the engine's own dialect (same SQL text, same bind
processors, so values are encoded exactly as SQLAlchemy would) and executed on the
connection the pool checked out, through asyncpg's prepared-statement cache: one round trip,
committed when it returns (autocommit, synchronous commit as configured on the server).

Driver errors come back as SQLAlchemy `DBAPIError`s (the same classes SQLAlchemy raises), and
a connection the error closed is invalidated, so the pool never hands it out again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement

_SUPPLIED = object()  # marks a bind whose value comes with each call


class DirectStatement:
    """One statement compiled for asyncpg, with its positional bind order and processors."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled: Any = statement.compile(dialect=dialect)  # a SQLCompiler
        if compiled.positiontup is None:
            raise ValueError("DirectStatement needs a positional (asyncpg) dialect")
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


class DirectExecutor:
    """Runs `DirectStatement`s on connections of an AUTOCOMMIT engine (PostgreSQL only)."""

    def __init__(self, autocommit_engine: AsyncEngine) -> None:
        if autocommit_engine.dialect.name != "postgresql":
            raise ValueError("DirectExecutor is PostgreSQL (asyncpg) only")
        self._engine = autocommit_engine
        self._dialect = autocommit_engine.dialect

    def prepare(self, statement: ClauseElement) -> DirectStatement:
        return DirectStatement(statement, self._dialect)

    async def execute(self, statement: DirectStatement, params: Mapping[str, Any]) -> None:
        """One statement, one row of parameters, autocommitted."""
        await self._run(statement, statement.args(params), many=False)

    async def execute_many(
        self, statement: DirectStatement, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """One statement for many rows: pipelined in one round trip and atomic (asyncpg runs
        the batch in one implicit transaction ending at its single Sync)."""
        await self._run(statement, [statement.args(row) for row in rows], many=True)

    async def _run(self, statement: DirectStatement, args: list[Any], *, many: bool) -> None:
        async with self._engine.connect() as conn:
            pooled = await conn.get_raw_connection()
            adapter, driver = pooled.dbapi_connection, pooled.driver_connection
            try:
                if many:
                    await driver.executemany(statement.sql, args)  # type: ignore[union-attr]
                else:
                    await driver.execute(statement.sql, *args)  # type: ignore[union-attr]
            except Exception as error:
                closed = bool(driver.is_closed())  # type: ignore[union-attr]
                if closed:
                    await conn.invalidate()
                raise self._wrap(statement.sql, error, adapter, closed) from error

    def _wrap(self, sql: str, error: Exception, adapter: Any, invalidated: bool) -> Exception:
        """The error SQLAlchemy would have raised for this driver error."""
        dbapi = self._dialect.loaded_dbapi
        try:
            # the asyncpg adapter's own translation (asyncpg class -> DBAPI class)
            adapter._handle_exception(error)
        except Exception as translated:
            return DBAPIError.instance(
                sql,
                None,
                translated,
                dbapi.Error,
                hide_parameters=True,
                connection_invalidated=invalidated,
                dialect=self._dialect,
            )
        return error  # pragma: no cover - the adapter always raises

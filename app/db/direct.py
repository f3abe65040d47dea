"""Hot paths: pre-compiled statements run on the pooled driver connection.

Used by the saver (checkpoint put, pending writes, get) and the Store (put, get, search
without a query). Each is a fixed statement shape (or a few, cached by the caller), so
most of their cost used to be SQLAlchemy's per-execute work (execution context, parameter and
result processing objects, cursor adaptation), and on SQLite one thread hop per step of
aiosqlite (BEGIN, each statement, fetch, COMMIT). Here each statement is compiled once by the
engine's own dialect (same SQL, same bind and result processors, so values are encoded and
decoded exactly as SQLAlchemy would: app/db/direct_statement.py) and run here, on the
connection the engine's pool checked out:

- PostgreSQL (asyncpg): one autocommitted statement through asyncpg's prepared-statement
  cache, one round trip, committed when it returns; a batch of rows is pipelined and atomic
  (asyncpg runs it in one implicit transaction ending at its single Sync). Several
  statements run in one explicit transaction.
- SQLite (aiosqlite): the whole unit of work (BEGIN IMMEDIATE, statements, COMMIT, or one
  read) in ONE hop to the connection's worker thread; a failure rolls back before returning.

A `session()` keeps one pooled connection for several units (a Store batch's reads, then
its writes). `before_cursor_execute` listeners are told of each statement. Driver errors
come back as the `DBAPIError`s SQLAlchemy would raise, and a connection the error broke is
invalidated, so the pool never hands it out again.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool, PoolProxiedConnection, QueuePool
from sqlalchemy.util import await_, greenlet_spawn

from app.db.dialect import reader
from app.db.direct_statement import DirectStatement, Preparer, Step, Work
from app.db.driver_errors import translate as _translate
from app.db.engine import PARK_LIMITS
from app.db.park import PARK_MAX, PARK_SECONDS, Park, ParkLimits, park_limits


class Runner:
    """Runs units of work: a `DirectExecutor` (a pooled connection per unit) or a
    `DirectSession` (one connection for all)."""

    async def _unit(self, work: Work, out: list[Any] | None) -> None:
        raise NotImplementedError

    async def write(self, *steps: Step) -> None:
        """Run the steps as one atomic unit, committed when this returns: one statement with
        its rows pipelined, or several in one transaction (PostgreSQL); any number in one
        BEGIN IMMEDIATE ... COMMIT (SQLite)."""
        work = [(s, [s.args(row) for row in rows]) for s, rows in steps if rows]
        if work:
            await self._unit(work, None)

    async def fetch(self, query: DirectStatement, params: Mapping[str, Any]) -> list[Any]:
        """Rows of one query (named tuples), outside any transaction."""
        raw: list[Any] = []
        await self._unit([(query, [query.args(params)])], raw)
        return query.rows(raw)


# The saver's and the Store's statements never plan better with their values: a checkpoint
# or item by key, a namespace's key range. Yet PostgreSQL re-plans a prepared statement on every
# execution while its generic plan's estimate looks worse than the custom plans': with 100,000
# Store items (a prefix range then estimated at 500 rows) it kept custom plans, ~50 us of
# planning per search, which made searches grow with the table. Connections serving the fast
# path plan once; the setting is reset before they go back to the engine's pool.
# The saver's per-run statements (put, put_writes, get by key: `session_settings=False`) do not
# need it: their generic plan costs what their custom plans do, so PostgreSQL's own choice
# (`auto`) switches to it after five executions on a connection. Skipping the setting for them
# spares the SET and RESET round trips whenever one comes from the pool (at 32 concurrent runs
# that was 1.3 of each per run: more units in flight than PARK_MAX).
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}


def fast_executor(engine: AsyncEngine, *, closed_by_owner: bool = False) -> DirectExecutor:
    """The fast path for the saver and the Store on `engine`'s own pool: autocommit, recently
    used connections parked, generic plans (the server builds one: `AppState.direct`).

    `closed_by_owner`: the caller calls `aclose()` before it disposes the engine (the server's
    `AppState.close`), so the executor need not listen for `engine.dispose()`. It should not
    when it can avoid it: an engine with any connection-event listener makes SQLAlchemy
    dispatch every connection event (connect, begin, execute, rollback...) of every Core
    statement on that engine, all of them empty here. Without an owner (a saver or Store built
    on an engine the caller disposes) the listener closes the parked connections on dispose."""
    # PostgreSQL: from the pool's size and overflow (create_engine); else from its size
    limits: ParkLimits = engine.get_execution_options().get(PARK_LIMITS) or park_limits(
        engine.pool.size() if isinstance(engine.pool, QueuePool) else None
    )
    return DirectExecutor(
        reader(engine),
        park_seconds=PARK_SECONDS,
        disposed_with=None if closed_by_owner else engine,
        closed_by_owner=closed_by_owner,
        session_settings=GENERIC_PLANS,
        park_max=limits.fast,
    )


class DirectExecutor(Preparer, Runner):
    """Runs `DirectStatement`s on connections of an engine opened with the autocommit
    options of `app.db.dialect.autocommit_read_options` (PostgreSQL: AUTOCOMMIT; SQLite: no
    automatic BEGIN)."""

    def __init__(
        self,
        autocommit_engine: AsyncEngine,
        *,
        park_seconds: float = 0.0,
        disposed_with: AsyncEngine | None = None,
        closed_by_owner: bool = False,
        session_settings: Mapping[str, str] | None = None,
        park_max: int = PARK_MAX,
    ) -> None:
        """`park_seconds` > 0: a connection that finished a unit cleanly stays checked out
        (parked, up to `park_max` of them: `app.db.park`) for the next unit for that long
        after its last use, sparing the pool's checkout and checkin (most of a small unit's
        CPU); it goes back to the pool when idle that long, after a failed unit, and on
        `engine.dispose()`.

        `disposed_with` (with `park_seconds` > 0, unless `closed_by_owner`): the engine the
        option engines were derived from; its `dispose()` closes the parked connections.
        `closed_by_owner`: the owner calls `aclose()` before disposing the engine instead.

        `session_settings` (PostgreSQL, with `park_seconds` > 0): settings a connection takes
        while it serves this executor (SET when taken from the pool, RESET before it goes
        back, so the pool's other users never see them); parking makes that once per burst.
        """
        super().__init__(autocommit_engine)
        self._dialect = autocommit_engine.dialect
        self._sqlite = self._dialect.name == "sqlite"
        if not self._sqlite and self._dialect.driver != "asyncpg":
            raise ValueError("DirectExecutor runs on asyncpg or aiosqlite")
        self._park_seconds = park_seconds
        settings = dict(session_settings or {}) if not self._sqlite else {}
        if settings and park_seconds <= 0:
            raise ValueError("session settings need parking (park_seconds > 0)")
        for name, value in settings.items():
            if not name.isidentifier() or not value.replace("_", "").isalnum():
                raise ValueError(f"bad session setting {name}={value}")
        # simple-query protocol (no arguments): several statements in one round trip
        self._set_sql = "; ".join(f"SET {k} = {v}" for k, v in settings.items())
        self._reset_sql = "; ".join(f"RESET {k}" for k in settings)
        # (connection, whether it took the session settings)
        self.parked: Park[tuple[PoolProxiedConnection, bool]] = Park(
            park_max if park_seconds > 0 else 0,
            self._give_back,
            idle_seconds=max(park_seconds, 0.0),
        )
        if park_seconds > 0 and not closed_by_owner:
            if disposed_with is None:
                raise ValueError("parking connections needs the engine they are disposed with")
            # `dispose()` runs on the engine the option engines were derived from
            event.listen(disposed_with.sync_engine, "engine_disposed", _unpark_on_dispose(self))

    @property
    def pool(self) -> Pool:
        """The engine's pool (where this executor's connections come from and go back)."""
        return self._engine.sync_engine.pool

    async def _unit(self, work: Work, out: list[Any] | None) -> None:
        if self._engine.sync_engine.dispatch.before_cursor_execute:
            async with self.session() as session:  # listeners see every statement
                await session._unit(work, out)
            return
        if self._park_seconds > 0:
            # `session()` inlined: its context manager cost a tenth of a small unit's CPU
            settings = False
            for statement, _rows in work:
                settings = settings or statement.session_settings
            pooled, settled = await self._acquire(settings)
            clean = False
            try:
                await DirectSession(self, pooled, None, None)._unit(work, out)
                clean = True
            finally:
                await self._release(pooled, settled, clean)
            return
        # checkout, the unit and checkin in one greenlet (a session takes two)
        await greenlet_spawn(self._checked_out_unit, work, out)

    def _checked_out_unit(self, work: Work, out: list[Any] | None) -> None:
        try:
            pooled = self._engine.sync_engine.raw_connection()
        except self._dialect.loaded_dbapi.Error as error:
            raise self._connect_error(error) from error
        try:
            await_(DirectSession(self, pooled, None, None)._unit(work, out))
        finally:
            pooled.close()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[DirectSession]:
        """One pooled connection for several units of work, returned to the pool on exit."""
        announce = self._engine.sync_engine.dispatch.before_cursor_execute
        if announce:  # listeners (tracing, statement counting) see every statement
            async with self._engine.connect() as conn:
                sync_conn = conn.sync_connection
                yield DirectSession(self, await conn.get_raw_connection(), announce, sync_conn)
            return
        # No listeners: take the pooled DBAPI connection itself (pool events such as the idle
        # ping still run), skipping the Connection object and its isolation-level switching;
        # the driver connection is outside any transaction here, i.e. autocommit.
        # (A session may run any statement: it takes the session settings.)
        pooled, settled = await self._acquire(True)
        clean = False
        try:
            yield DirectSession(self, pooled, None, None)
            clean = True
        finally:
            await self._release(pooled, settled, clean)

    async def _acquire(self, settings: bool) -> tuple[PoolProxiedConnection, bool]:
        """A parked connection, else one from the pool (a failed connect as SQLAlchemy's
        error), with the session settings if `settings`; and whether it has them."""
        found = self.parked.take(_settled if settings and self._set_sql else None)
        pooled, settled = found if found is not None else (None, False)
        if pooled is None:
            try:
                pooled = await self._engine.raw_connection()
            except self._dialect.loaded_dbapi.Error as error:
                raise self._connect_error(error) from error
        if settings and not settled and self._set_sql:
            try:
                await pooled.driver_connection.execute(self._set_sql)  # type: ignore[union-attr]
            except BaseException:
                await greenlet_spawn(pooled.invalidate)
                await greenlet_spawn(pooled.close)
                raise
            settled = True
        return pooled, settled

    async def _return(self, pooled: PoolProxiedConnection, settled: bool) -> None:
        """Back to the pool, without this executor's session settings."""
        if settled and self._reset_sql and pooled.is_valid:
            try:
                await pooled.driver_connection.execute(self._reset_sql)  # type: ignore[union-attr]
            except Exception:
                await greenlet_spawn(pooled.invalidate)  # unknown settings: never reused
        await greenlet_spawn(pooled.close)

    async def _give_back(self, parked: tuple[PoolProxiedConnection, bool]) -> None:
        await self._return(*parked)

    async def _release(self, pooled: PoolProxiedConnection, settled: bool, clean: bool) -> None:
        """Park a connection that finished cleanly, else return it to the pool."""
        if not (clean and pooled.is_valid and self.parked.keep((pooled, settled))):
            await self._return(pooled, settled)

    def _connect_error(self, error: Exception) -> StatementError:
        """A failed connect as the `DBAPIError` SQLAlchemy's `Connection` would raise (a raw
        pool checkout skips that wrapping), so callers classify it the same way: e.g. "the
        database system is starting up" (57P03) is an outage, not a bug."""
        return DBAPIError.instance(
            None,
            None,
            error,
            self._dialect.loaded_dbapi.Error,
            hide_parameters=True,
            connection_invalidated=self._dialect.is_disconnect(error, None, None),  # type: ignore[arg-type]
            dialect=self._dialect,
        )

    async def aclose(self) -> None:
        """Return every parked connection to the pool and wait for the returns under way.
        The server calls this before `engine.dispose()`."""
        await self.parked.aclose()

    def _unpark_all(self) -> None:
        """On `engine.dispose()` (in its greenlet): close every parked connection."""
        for pooled, _settled in self.parked.take_all():
            pooled.invalidate()  # closes it: its pool is gone, a check-in would not
            pooled.close()


def _settled(parked: tuple[PoolProxiedConnection, bool]) -> bool:
    """A parked connection that took the session settings."""
    return parked[1]


def _unpark_on_dispose(executor: DirectExecutor) -> Callable[[Any], None]:
    ref = weakref.ref(executor)  # the engine must not keep executors alive

    def unpark(_engine: Any) -> None:
        alive = ref()
        if alive is not None:
            alive._unpark_all()

    return unpark


class DirectSession(Runner):
    """Units of work on one checked-out connection (see `DirectExecutor.session`)."""

    def __init__(
        self, executor: DirectExecutor, pooled: PoolProxiedConnection, announce: Any, conn: Any
    ) -> None:
        self._executor = executor
        self._pooled = pooled
        self._announce = announce
        self._conn = conn

    async def _unit(self, work: Work, out: list[Any] | None) -> None:
        if self._announce is not None:
            for statement, rows in work:
                many = len(rows) > 1
                self._announce(self._conn, None, statement.sql, rows, None, many)
        executor = self._executor
        dialect = executor._dialect
        pooled = self._pooled
        adapter, driver = pooled.dbapi_connection, pooled.driver_connection
        try:
            if executor._sqlite:
                sql_conn = driver._conn  # type: ignore[union-attr]
                await driver._execute(_sqlite_unit, sql_conn, work, out)  # type: ignore[union-attr]
            else:
                await _asyncpg_unit(driver, work, out)
        except Exception as error:
            translated = _translate(dialect, error)
            if not isinstance(translated, dialect.loaded_dbapi.Error):
                raise
            broken = dialect.is_disconnect(translated, adapter, None)
            if broken:  # never hand this connection out again
                await greenlet_spawn(pooled.invalidate, translated)
            raise DBAPIError.instance(
                work[-1][0].sql,
                None,
                translated,
                dialect.loaded_dbapi.Error,
                hide_parameters=True,
                connection_invalidated=broken,
                dialect=dialect,
            ) from error


async def _asyncpg_unit(driver: Any, work: Work, out: list[Any] | None) -> None:
    if len(work) > 1:
        async with driver.transaction():
            for statement, rows in work:
                await _asyncpg_step(driver, statement, rows)
        return
    ((statement, rows),) = work
    if out is not None:
        out.extend(await driver.fetch(statement.sql, *rows[0]))
    else:
        await _asyncpg_step(driver, statement, rows)


async def _asyncpg_step(driver: Any, statement: DirectStatement, rows: list[list[Any]]) -> None:
    if len(rows) == 1:
        await driver.execute(statement.sql, *rows[0])
    else:
        await driver.executemany(statement.sql, rows)


def _sqlite_unit(db: sqlite3.Connection, work: Work, out: list[Any] | None) -> None:
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

"""The one way to reach the database: an autocommit reader and a transaction helper.

Every domain reads with `read(engine)` and writes with `transaction(engine)`, running the
statements its own `queries.py` builds on the `AsyncConnection` it gets. Nothing else opens
connections. The LISTEN listener keeps one connection of the same pool checked out for its
whole life (LISTEN needs a session that lasts) and says so where it takes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.dialect import (
    autocommit_read_options,
    autocommits,
    reader,
    single_statement_autocommit,
)
from app.db.engine import AUTOCOMMIT_ENGINE, PARKED_READS
from app.db.park import Park


@asynccontextmanager
async def read(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection for independent single statements: autocommit on PostgreSQL (no BEGIN /
    ROLLBACK round trips around one SELECT), no BEGIN IMMEDIATE write lock on SQLite.

    On PostgreSQL the connection goes back without `AsyncConnection.__aexit__`'s shielded
    task: returning an autocommit asyncpg connection to the pool does no I/O (no transaction
    to roll back; the isolation reset is a Python attribute), so no cancellation can interrupt
    it, and that task cost three event-loop turns per statement (about 90 us of CPU:
    bench/api_cpu_bench.py). SQLite's return goes through aiosqlite's thread, an await point,
    so it keeps the shield.

    On PostgreSQL the connection comes from `engine` itself and is made autocommit on
    checkout, not from `reader(engine)`: SQLAlchemy applies an engine-level isolation level
    through an `engine_connect` listener, and an engine with any listener dispatches its
    connection events (connect, begin, rollback, execute...) on every statement, about 40 us
    of CPU per read (bench/api_cpu_bench.py). The connection is the same either way. The
    serving engine's connections are in autocommit already (`create_engine(autocommit=True)`).

    The serving engine's reads park their connection afterwards (`app.db.park`): the next
    read within `PARK_SECONDS` takes it without the pool's checkout and check-in or a new
    `Connection` and its autobegin and reset: on PostgreSQL a one-row read cost 246 us of
    CPU instead of 317 (bench/core_read_bench.py, `serving` against `unparked`); on SQLite,
    where the check-in's rollback is a hop to aiosqlite's thread, 380 us instead of 630. A
    read that raised gives its connection back to the pool. A parked SQLite connection holds
    no lock and no snapshot: its reads run outside a transaction and are read to the end.
    """
    postgres = engine.dialect.name == "postgresql"
    options = engine.get_execution_options()
    parked: Park[AsyncConnection] | None = options.get(PARKED_READS)
    taken = parked.take() if parked is not None else None
    if taken is not None:
        conn = taken
    elif postgres:
        conn = await engine.connect()
        if not options.get(AUTOCOMMIT_ENGINE):
            await conn.execution_options(**autocommit_read_options(engine.dialect))
    else:
        conn = await reader(engine).connect()
    clean = False
    try:
        yield conn
        clean = True
    finally:
        # only a connection whose statements all went through is kept for the next read
        if not (clean and parked is not None and not conn.invalidated and parked.keep(conn)):
            if postgres:
                await conn.close()
            else:  # the context manager's exit: its close completes even if we are cancelled
                await conn.__aexit__(None, None, None)


async def close_engine(engine: AsyncEngine) -> None:
    """Give back the connections `read` keeps parked on `engine`, then dispose of it."""
    parked: Park[AsyncConnection] | None = engine.get_execution_options().get(PARKED_READS)
    if parked is not None:
        await parked.aclose()
    await engine.dispose()


@asynccontextmanager
async def transaction(
    engine: AsyncEngine, *, one_statement: bool = False
) -> AsyncIterator[AsyncConnection]:
    """A connection whose statements commit together, or not at all.

    `one_statement=True` says the caller sends a single (atomic) write: PostgreSQL then runs it
    autocommitted, saving the BEGIN/COMMIT round trips; SQLite still takes its write transaction
    (BEGIN IMMEDIATE), which is what serialises its writers.
    """
    if one_statement and single_statement_autocommit(engine.dialect):
        async with read(engine) as conn:  # PostgreSQL: an autocommit connection
            yield conn
    elif autocommits(engine):
        # the serving engine: out of autocommit for this connection's checkout only
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level=conn.default_isolation_level)
            async with conn.begin():
                yield conn
    else:
        async with engine.begin() as conn:
            yield conn

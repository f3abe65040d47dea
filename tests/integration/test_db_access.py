"""app.db.access: the autocommit reader returns its connection on every exit, cancellation
included (on PostgreSQL it closes without SQLAlchemy's shielded task), on both dialects."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.access import close_engine, read, transaction


def _checked_out(engine: AsyncEngine) -> int:
    return int(engine.sync_engine.pool.checkedout())  # type: ignore[attr-defined]


async def test_read_returns_its_connection(engine: AsyncEngine) -> None:
    for _ in range(5):
        async with read(engine) as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
            assert _checked_out(engine) == 1
    assert _checked_out(engine) == 0


async def test_read_returns_its_connection_after_an_error(engine: AsyncEngine) -> None:
    with pytest.raises(ValueError):
        async with read(engine) as conn:
            await conn.execute(text("SELECT 1"))
            raise ValueError("boom")
    assert _checked_out(engine) == 0
    async with read(engine) as conn:  # and the pooled connection still works
        assert (await conn.execute(text("SELECT 2"))).scalar() == 2


@pytest.mark.postgres
@pytest.mark.parametrize("serving", [False, True], ids=["plain-engine", "serving-engine"])
async def test_cancelled_read_returns_its_connection(pg_url: str, serving: bool) -> None:
    """Also on the serving engine, whose reads park their connection: never a cancelled one."""
    from app.db.engine import create_engine

    size = 10 if serving else 1  # the serving engine's pool parks reads; a pool of 1 cannot
    engine = create_engine(pg_url, pool_size=size, max_overflow=0, autocommit=serving)
    try:

        async def slow() -> None:
            async with read(engine) as conn:
                await conn.execute(text("SELECT pg_sleep(5)"))

        task = asyncio.create_task(slow())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert _checked_out(engine) == 0
        # the next read gets a working connection (replaced if the cancel broke it)
        async with read(engine) as conn:
            assert (await asyncio.wait_for(conn.execute(text("SELECT 3")), 10)).scalar() == 3
    finally:
        await close_engine(engine)


async def test_one_statement_transaction_writes(engine: AsyncEngine) -> None:
    async with transaction(engine, one_statement=True) as conn:
        assert (await conn.execute(text("SELECT 4"))).scalar() == 4
    assert _checked_out(engine) == 0


async def _one_transaction(conn: AsyncConnection) -> bool:
    """Whether two statements on `conn` run in one server transaction (the same xid)."""
    first = (await conn.execute(text("SELECT pg_current_xact_id()::text"))).scalar()
    second = (await conn.execute(text("SELECT pg_current_xact_id()::text"))).scalar()
    return bool(first == second)


@pytest.mark.postgres
@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit-engine", "plain-engine"])
async def test_transactions_are_atomic_and_reads_autocommit_on_either_engine(
    pg_url: str, autocommit: bool
) -> None:
    """The serving engine's connections autocommit (`create_engine(autocommit=True)`); a
    transaction takes its connection out of autocommit for that checkout only. With one pooled
    connection, the same connection serves every step here."""
    from app.db.engine import create_engine

    engine = create_engine(pg_url, pool_size=1, max_overflow=0, autocommit=autocommit)
    table = f"access_probe_{'ac' if autocommit else 'plain'}"
    try:
        async with transaction(engine) as conn:
            await conn.execute(text(f"CREATE TABLE {table} (v int)"))

        with pytest.raises(ValueError):
            async with transaction(engine) as conn:
                assert await _one_transaction(conn)
                await conn.execute(text(f"INSERT INTO {table} VALUES (1)"))
                raise ValueError("roll it back")
        async with read(engine) as conn:  # the same connection, in autocommit again
            assert not await _one_transaction(conn)
            assert (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar() == 0

        with pytest.raises(ValueError):  # a read's write commits at once
            async with read(engine) as conn:
                await conn.execute(text(f"INSERT INTO {table} VALUES (2)"))
                raise ValueError("too late to take back")
        async with transaction(engine) as conn:
            await conn.execute(text(f"INSERT INTO {table} VALUES (3)"))
            await conn.execute(text(f"INSERT INTO {table} VALUES (4)"))
        async with engine.connect() as conn:  # back in the pool as the engine made it
            assert await _one_transaction(conn) is not autocommit
            values = (await conn.execute(text(f"SELECT v FROM {table} ORDER BY v"))).scalars()
            assert list(values) == [2, 3, 4]
        assert _checked_out(engine) == 0
    finally:
        async with transaction(engine) as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        await engine.dispose()

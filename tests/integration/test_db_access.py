"""app.db.access: the autocommit reader returns its connection on every exit, cancellation
included (on PostgreSQL it closes without SQLAlchemy's shielded task), on both dialects."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction


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
async def test_cancelled_read_returns_its_connection(pg_url: str) -> None:
    from app.db.engine import create_engine

    engine = create_engine(pg_url, pool_size=1, max_overflow=0)
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
        # the one pooled connection serves the next read (replaced if the cancel broke it)
        async with read(engine) as conn:
            assert (await asyncio.wait_for(conn.execute(text("SELECT 3")), 10)).scalar() == 3
    finally:
        await engine.dispose()


async def test_one_statement_transaction_writes(engine: AsyncEngine) -> None:
    async with transaction(engine, one_statement=True) as conn:
        assert (await conn.execute(text("SELECT 4"))).scalar() == 4
    assert _checked_out(engine) == 0

"""app.db.access.read on the embedded default (a SQLite file, `create_engine(autocommit=True)`
as the server makes it) parks its connection too: reads reuse it, it blocks no writer, and it
goes back when idle, after a failure and before the engine is disposed."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import close_engine, read, transaction
from app.db.engine import PARKED_READS, create_engine
from app.db.park import PARK_SECONDS, Park


def _checked_out(engine: AsyncEngine) -> int:
    return int(engine.sync_engine.pool.checkedout())  # type: ignore[attr-defined]


def _park(engine: AsyncEngine) -> Park[object]:
    parked = engine.get_execution_options()[PARKED_READS]
    assert isinstance(parked, Park)
    return parked


@pytest.fixture
async def serving(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'parked.db'}", autocommit=True)
    async with transaction(engine) as conn:
        await conn.execute(text("CREATE TABLE probe (v int)"))
    try:
        yield engine
    finally:
        await close_engine(engine)


async def _count(engine: AsyncEngine) -> int:
    async with read(engine) as conn:
        return int((await conn.execute(text("SELECT count(*) FROM probe"))).scalar_one())


async def test_reads_reuse_a_parked_connection_that_blocks_no_writer(
    serving: AsyncEngine,
) -> None:
    checkouts: list[object] = []
    event.listen(serving.sync_engine.pool, "checkout", lambda *args: checkouts.append(args))
    for expected in range(3):
        assert await _count(serving) == expected
        assert len(_park(serving).items) == 1
        # a writer takes the write lock and commits while the reader's connection is parked
        async with transaction(serving) as conn:
            await conn.execute(text("INSERT INTO probe VALUES (1)"))
    assert await _count(serving) == 3  # the parked connection sees every commit
    # the reads shared one checkout; each transaction took its own
    assert len(checkouts) == 1 + 3
    await asyncio.sleep(PARK_SECONDS * 3)  # idle: back in the pool
    assert _park(serving).items == [] and _checked_out(serving) == 0


async def test_a_read_that_raised_gives_its_connection_back(serving: AsyncEngine) -> None:
    with pytest.raises(ValueError):
        async with read(serving) as conn:
            await conn.execute(text("SELECT 1"))
            raise ValueError("boom")
    assert _park(serving).items == [] and _checked_out(serving) == 0


async def test_close_engine_gives_parked_connections_back(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'closed.db'}", autocommit=True)
    async with read(engine) as conn:
        await conn.execute(text("SELECT 1"))
    assert _checked_out(engine) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "garbage collector ... non-checked-in connection"
        await close_engine(engine)
    assert _park(engine).items == [] and _checked_out(engine) == 0


async def test_engines_in_memory_or_without_autocommit_do_not_park(tmp_path: Path) -> None:
    plain = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}")
    memory = create_engine("sqlite+aiosqlite://", autocommit=True)
    for engine in (plain, memory):
        assert PARKED_READS not in engine.get_execution_options()
        await close_engine(engine)

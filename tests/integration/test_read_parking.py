"""app.db.access.read on the serving engine (`create_engine(autocommit=True)`, PostgreSQL or a
SQLite file) keeps its connection parked for the next read: no pool checkout while reads
follow each other, back to the pool when idle, after any failure, and before the engine is
disposed; a parked SQLite reader blocks no writer."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import close_engine, read, transaction
from app.db.engine import PARKED_READS, create_engine
from app.db.park import PARK_SECONDS, Park, park_limits


def _checked_out(engine: AsyncEngine) -> int:
    return int(engine.sync_engine.pool.checkedout())  # type: ignore[attr-defined]


def _park(engine: AsyncEngine) -> Park[object]:
    parked = engine.get_execution_options()[PARKED_READS]
    assert isinstance(parked, Park)
    return parked


async def _backend(engine: AsyncEngine) -> int:
    async with read(engine) as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


@pytest.fixture
async def serving(pg_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(pg_url, bounded=True, autocommit=True)  # pool of 10, as served
    try:
        yield engine
    finally:
        await close_engine(engine)


@pytest.mark.postgres
async def test_reads_reuse_one_parked_connection_then_give_it_back(serving: AsyncEngine) -> None:
    checkouts: list[object] = []
    event.listen(serving.sync_engine.pool, "checkout", lambda *args: checkouts.append(args))
    backends = {await _backend(serving) for _ in range(20)}
    assert len(backends) == 1 and len(checkouts) == 1  # one checkout served twenty reads
    assert _checked_out(serving) == 1 and len(_park(serving).items) == 1
    await asyncio.sleep(PARK_SECONDS * 3)  # idle: back in the pool
    assert _checked_out(serving) == 0 and _park(serving).items == []
    assert await _backend(serving) in backends  # the pool hands the same one out again


@pytest.mark.postgres
async def test_a_read_that_raised_gives_its_connection_back(serving: AsyncEngine) -> None:
    with pytest.raises(ValueError):
        async with read(serving) as conn:
            await conn.execute(text("SELECT 1"))
            raise ValueError("boom")
    assert _checked_out(serving) == 0 and _park(serving).items == []


@pytest.mark.postgres
async def test_a_parked_connection_autocommits_after_a_caught_error(serving: AsyncEngine) -> None:
    """A statement error the caller handles leaves no aborted transaction on the connection
    it parks: the next read on it runs, and its writes commit by themselves."""
    async with transaction(serving) as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS parked_probe (v int)"))
    try:
        async with read(serving) as conn:
            with pytest.raises(DBAPIError):
                await conn.execute(text("SELECT 1 / 0"))
            await conn.execute(text("INSERT INTO parked_probe VALUES (1)"))
        assert len(_park(serving).items) == 1
        async with read(serving) as conn:  # the parked connection
            assert (await conn.execute(text("SELECT count(*) FROM parked_probe"))).scalar() == 1
            xid = text("SELECT pg_current_xact_id()::text")
            assert (await conn.execute(xid)).scalar() != (await conn.execute(xid)).scalar()
        async with transaction(serving) as conn:  # seen by another connection: committed
            assert (await conn.execute(text("SELECT count(*) FROM parked_probe"))).scalar() == 1
    finally:
        async with transaction(serving) as conn:
            await conn.execute(text("DROP TABLE parked_probe"))


@pytest.mark.postgres
async def test_concurrent_reads_park_no_more_than_their_share(serving: AsyncEngine) -> None:
    limit = _park(serving).limit
    assert limit == park_limits(10, 10).reads == 4  # create_engine's defaults

    async def one() -> None:
        async with read(serving) as conn:
            await conn.execute(text("SELECT pg_sleep(0.05)"))

    await asyncio.gather(*(one() for _ in range(limit * 2)))
    assert len(_park(serving).items) == limit and _checked_out(serving) == limit


@pytest.mark.postgres
async def test_a_parked_connection_that_died_is_not_parked_again(serving: AsyncEngine) -> None:
    _park(serving)._idle_seconds = 60.0  # stays parked while its backend is terminated
    dead = await _backend(serving)  # parked now
    async with transaction(serving) as conn:
        stop = text("SELECT pg_terminate_backend(:pid, 5000)")  # returns once it is gone
        assert (await conn.execute(stop, {"pid": dead})).scalar()
    # the next read takes the dead connection (no ping for one used moments ago, as from the
    # pool) and fails as a disconnect; the one after gets a new connection
    with pytest.raises(DBAPIError) as failed:
        await _backend(serving)
    assert failed.value.connection_invalidated
    assert _park(serving).items == []
    assert await _backend(serving) != dead


@pytest.mark.postgres
async def test_close_engine_gives_parked_connections_back_before_disposing(pg_url: str) -> None:
    engine = create_engine(pg_url, bounded=True, autocommit=True)
    await _backend(engine)
    assert _checked_out(engine) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "garbage collector ... non-checked-in connection"
        await close_engine(engine)
    assert _park(engine).items == [] and _checked_out(engine) == 0


@pytest.mark.postgres
async def test_reads_on_an_engine_without_autocommit_do_not_park(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        assert PARKED_READS not in engine.get_execution_options()
        await _backend(engine)
        assert _checked_out(engine) == 0
    finally:
        await close_engine(engine)


# --------------------------------------------------------------------------- SQLite


@pytest.fixture
async def serving_sqlite(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
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
    serving_sqlite: AsyncEngine,
) -> None:
    checkouts: list[object] = []
    event.listen(serving_sqlite.sync_engine.pool, "checkout", lambda *args: checkouts.append(args))
    for expected in range(3):
        assert await _count(serving_sqlite) == expected
        assert len(_park(serving_sqlite).items) == 1
        # a writer takes the write lock and commits while the reader's connection is parked
        async with transaction(serving_sqlite) as conn:
            await conn.execute(text("INSERT INTO probe VALUES (1)"))
    assert await _count(serving_sqlite) == 3  # the parked connection sees every commit
    # the reads shared one checkout; each transaction took its own
    assert len(checkouts) == 1 + 3
    await asyncio.sleep(PARK_SECONDS * 3)  # idle: back in the pool
    assert _park(serving_sqlite).items == [] and _checked_out(serving_sqlite) == 0


async def test_a_sqlite_read_that_raised_gives_its_connection_back(
    serving_sqlite: AsyncEngine,
) -> None:
    with pytest.raises(ValueError):
        async with read(serving_sqlite) as conn:
            await conn.execute(text("SELECT 1"))
            raise ValueError("boom")
    assert _park(serving_sqlite).items == [] and _checked_out(serving_sqlite) == 0


async def test_close_engine_gives_parked_sqlite_connections_back(tmp_path: Path) -> None:
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

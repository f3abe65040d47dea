"""app.db.access.read on the serving engine (PostgreSQL, `create_engine(autocommit=True)`)
keeps its connection parked for the next read: no pool checkout while reads follow each
other, back to the pool when idle, after any failure, and before the engine is disposed."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import close_engine, read, transaction
from app.db.engine import PARKED_READS, create_engine
from app.db.park import PARK_SECONDS, Park, park_limits

pytestmark = pytest.mark.postgres


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


async def test_reads_reuse_one_parked_connection_then_give_it_back(serving: AsyncEngine) -> None:
    checkouts: list[object] = []
    event.listen(serving.sync_engine.pool, "checkout", lambda *args: checkouts.append(args))
    backends = {await _backend(serving) for _ in range(20)}
    assert len(backends) == 1 and len(checkouts) == 1  # one checkout served twenty reads
    assert _checked_out(serving) == 1 and len(_park(serving).items) == 1
    await asyncio.sleep(PARK_SECONDS * 3)  # idle: back in the pool
    assert _checked_out(serving) == 0 and _park(serving).items == []
    assert await _backend(serving) in backends  # the pool hands the same one out again


async def test_a_read_that_raised_gives_its_connection_back(serving: AsyncEngine) -> None:
    with pytest.raises(ValueError):
        async with read(serving) as conn:
            await conn.execute(text("SELECT 1"))
            raise ValueError("boom")
    assert _checked_out(serving) == 0 and _park(serving).items == []


async def test_a_cancelled_read_gives_its_connection_back(serving: AsyncEngine) -> None:
    async def slow() -> None:
        async with read(serving) as conn:
            await conn.execute(text("SELECT pg_sleep(5)"))

    task = asyncio.create_task(slow())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _park(serving).items == []
    async with read(serving) as conn:
        assert (await asyncio.wait_for(conn.execute(text("SELECT 3")), 10)).scalar() == 3


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


async def test_concurrent_reads_park_no_more_than_their_share(serving: AsyncEngine) -> None:
    limit = _park(serving).limit
    assert limit == park_limits(10, 10).reads == 4  # create_engine's defaults

    async def one() -> None:
        async with read(serving) as conn:
            await conn.execute(text("SELECT pg_sleep(0.05)"))

    await asyncio.gather(*(one() for _ in range(limit * 2)))
    assert len(_park(serving).items) == limit and _checked_out(serving) == limit


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


async def test_close_engine_gives_parked_connections_back_before_disposing(pg_url: str) -> None:
    engine = create_engine(pg_url, bounded=True, autocommit=True)
    await _backend(engine)
    assert _checked_out(engine) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "garbage collector ... non-checked-in connection"
        await close_engine(engine)
    assert _park(engine).items == [] and _checked_out(engine) == 0


async def test_reads_on_an_engine_without_autocommit_do_not_park(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        assert PARKED_READS not in engine.get_execution_options()
        await _backend(engine)
        assert _checked_out(engine) == 0
    finally:
        await close_engine(engine)

"""The saver's direct write path: driver errors, lost connections, atomic batches."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from tests.conftest import terminate_backends


def cfg(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def make_checkpoint(value: Any, version: str = "1") -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = {"big": value}
    checkpoint["channel_versions"] = {"big": version}
    return checkpoint


async def count(engine: AsyncEngine, table: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def test_put_and_writes_round_trip_through_the_direct_path(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    checkpoint = make_checkpoint([1, 2, 3])
    stored = await saver.aput(cfg("t"), checkpoint, {"step": 1}, {"big": "1"})
    await saver.aput_writes(stored, [("big", [4]), ("other", "x")], "task-1", "~p")
    # special writes replace, regular writes are kept as first written
    await saver.aput_writes(stored, [("big", [5])], "task-1", "~p")
    got = await saver.aget_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"] == {"big": [1, 2, 3]}
    assert got.metadata["step"] == 1
    assert [(t, c, v) for t, c, v in got.pending_writes or []] == [
        ("task-1", "big", [4]),
        ("task-1", "other", "x"),
    ]
    assert await count(engine, checkpoint_writes) == 2


async def test_a_lost_connection_fails_the_put_and_the_pool_recovers(engine: AsyncEngine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("terminating a backend is PostgreSQL only")
    saver = SQLSaver(engine)
    await saver.aput(cfg("lost"), make_checkpoint([1]), {}, {"big": "1"})
    # kill the pooled connections from outside the pool (as a server restart would)
    assert await terminate_backends(engine) >= 1
    failed = 0
    for _ in range(engine.pool.size() + 2):  # every pooled connection may have been killed
        try:
            await saver.aput(cfg("lost"), make_checkpoint([2]), {}, {"big": "1"})
        except DBAPIError as exc:
            assert exc.connection_invalidated
            failed += 1
    assert failed >= 1
    # the dead connections were invalidated: writes work again
    stored = await saver.aput(cfg("lost"), make_checkpoint([3], "3"), {}, {"big": "3"})
    await saver.aput_writes(stored, [("big", [4])], "task", "")
    got = await saver.aget_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == {"big": [3]}


_REFUSE_B = {
    "sqlite": [
        "CREATE TRIGGER gk_refuse_b BEFORE INSERT ON checkpoint_writes WHEN NEW.channel = 'b' "
        "BEGIN SELECT RAISE(ABORT, 'write b refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION gk_refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.channel = 'b' THEN RAISE EXCEPTION 'write b refused'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER gk_refuse_b BEFORE INSERT ON checkpoint_writes "
        "FOR EACH ROW EXECUTE FUNCTION gk_refuse_b()",
    ],
}
_ALLOW_B = {
    "sqlite": ["DROP TRIGGER IF EXISTS gk_refuse_b"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS gk_refuse_b ON checkpoint_writes",
        "DROP FUNCTION IF EXISTS gk_refuse_b()",
    ],
}


async def test_a_refused_write_batch_leaves_no_row(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    stored = await saver.aput(cfg("w"), make_checkpoint([1]), {}, {"big": "1"})
    dialect = engine.dialect.name
    async with engine.begin() as conn:
        for sql in _REFUSE_B[dialect]:
            await conn.exec_driver_sql(sql)
    try:
        # the database refuses the second row after the first was sent: all or nothing
        with pytest.raises(DBAPIError, match="write b refused"):
            await saver.aput_writes(stored, [("a", 1), ("b", 2)], "task", "")
    finally:
        async with engine.begin() as conn:
            for sql in _ALLOW_B[dialect]:
                await conn.exec_driver_sql(sql)
    assert await count(engine, checkpoint_writes) == 0
    assert await count(engine, checkpoints) == 1
    assert await count(engine, checkpoint_blobs) == 1
    await saver.aput_writes(stored, [("a", 1), ("b", 2)], "task", "")
    assert await count(engine, checkpoint_writes) == 2

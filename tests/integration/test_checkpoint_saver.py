"""SQLSaver storage behaviour: blobs, writes, tenants, encryption, sync bridge, bad input."""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import (
    DecryptionFailed,
    InvalidCheckpointInput,
    SQLSaver,
    ThreadHasCheckpoints,
    make_serde,
    tuple_queries,
)
from app.checkpoint.serde import parse_key
from app.db.tables import checkpoint_blobs, checkpoint_writes, checkpoints
from app.errors import InvalidInput
from tests.integration.test_checkpoint_delta import count_statements

SECRET = "top-secret-plaintext-value"
KEY = "0123456789abcdef0123456789abcdef"


def cfg(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def put(
    saver: SQLSaver,
    config: RunnableConfig,
    values: dict[str, Any],
    versions: dict[str, Any],
    new: dict[str, Any] | None = None,
    **metadata: Any,
) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions
    md: Any = {"source": "loop", "step": 0, "parents": {}, **metadata}
    return await saver.aput(config, checkpoint, md, versions if new is None else new)


async def count(engine: AsyncEngine, table: Any, thread_id: str | None = None) -> int:
    stmt = select(func.count()).select_from(table)
    if thread_id is not None:
        stmt = stmt.where(table.c.thread_id == thread_id)
    async with engine.connect() as conn:
        return int(await conn.scalar(stmt) or 0)


async def test_unchanged_channels_are_not_rewritten(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    big = {"doc": list(range(1000))}
    c1 = await put(saver, cfg("t"), {"big": big, "n": 1}, {"big": "1", "n": "1"})
    c2 = await put(saver, c1, {"big": big, "n": 2}, {"big": "1", "n": "2"}, new={"n": "2"})
    c3 = await put(saver, c2, {"big": big, "n": 3}, {"big": "1", "n": "3"}, new={"n": "3"})
    assert await count(engine, checkpoint_blobs, "t") == 1  # one blob for `big`; n is inline
    for config, n in ((c1, 1), (c2, 2), (c3, 3)):
        tup = await saver.aget_tuple(config)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"big": big, "n": n}


async def test_get_by_id_touches_only_referenced_blobs(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config = cfg("t")
    for i in range(30):
        config = await put(saver, config, {"v": [i]}, {"v": f"{i:032}"})
    assert await count(engine, checkpoint_blobs, "t") == 30
    first = [t async for t in saver.alist(cfg("t"))][-1]
    with count_statements(engine) as statements:
        tup = await saver.aget_tuple(first.config)
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": [0]}
    assert len(statements) == 1  # checkpoint, its blobs and its writes in one statement
    # ... and the blob lookup is a full primary-key probe, not a scan of the thread's blobs
    # (given a table big enough for the planner to care: 3,000 more blobs in the thread)
    filler = [
        {
            "tenant_id": saver.tenant_id,
            "thread_id": "t",
            "checkpoint_ns": "",
            "channel": f"c{i % 10}",
            "version": f"{i:032}",
            "type": "bytes",
            "blob": b"x" * 100,
        }
        for i in range(3000)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(checkpoint_blobs), filler)
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            await conn.execute(text("ANALYZE checkpoint_blobs"))
            await conn.commit()
    stmt = tuple_queries.select_tuple(engine.dialect, by_id=True)
    params = {**first.config["configurable"], "tenant_id": saver.tenant_id}
    compiled = str(
        stmt.params(**params).compile(
            dialect=engine.dialect, compile_kwargs={"literal_binds": True}
        )
    )
    async with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            plan = "\n".join(
                r[0] for r in await conn.exec_driver_sql("EXPLAIN ANALYZE " + compiled)
            )
            assert "pk_checkpoint_blobs" in plan, plan
            blob_scan = plan[plan.index("pk_checkpoint_blobs") :]
            assert "version)::text = " in blob_scan.split("\n")[1]
            assert "rows=1 loops=1" in blob_scan.split("\n")[0]
        else:
            plan = "\n".join(
                str(r[3]) for r in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled)
            )
            blob_line = next(line for line in plan.splitlines() if "checkpoint_blobs" in line)
            assert "version=?" in blob_line.replace(" ", ""), plan
    latest = await saver.aget_tuple(cfg("t"))
    assert latest is not None and latest.checkpoint["channel_values"] == {"v": [29]}
    assert await saver.aget_tuple(cfg("t", "no-such-checkpoint")) is None
    assert await saver.aget_tuple(cfg("no-such-thread")) is None


async def test_writes_order_and_special_writes_replace(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config = await put(saver, cfg("w"), {}, {})
    await saver.aput_writes(config, [("a", 1), ("b", 2)], "task-2", "~2")
    await saver.aput_writes(config, [("c", 3)], "task-1", "~1")
    # a retried task's regular writes do not duplicate or change what was saved
    await saver.aput_writes(config, [("a", 100)], "task-2", "~2")
    await saver.aput_writes(config, [(ERROR, "first")], "task-3", "~3")
    await saver.aput_writes(config, [(ERROR, "second")], "task-3", "~3")
    await saver.aput_writes(config, [(INTERRUPT, "i1")], "task-3", "~3")
    await saver.aput_writes(config, [(INTERRUPT, "i2")], "task-3", "~3")
    tup = await saver.aget_tuple(config)
    assert tup is not None
    assert tup.pending_writes == [
        ("task-1", "c", 3),
        ("task-2", "a", 1),
        ("task-2", "b", 2),
        ("task-3", INTERRUPT, "i2"),  # idx -3 sorts before -1
        ("task-3", ERROR, "second"),
    ]


async def test_tenants_are_isolated(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    other = saver.for_tenant("tenant-b")
    await put(saver, cfg("shared-id"), {"who": "default"}, {"who": "1"})
    assert await other.aget_tuple(cfg("shared-id")) is None
    assert [t async for t in other.alist(None)] == []
    await put(other, cfg("shared-id"), {"who": "b"}, {"who": "1"})
    mine = await saver.aget_tuple(cfg("shared-id"))
    theirs = await other.aget_tuple(cfg("shared-id"))
    assert mine and theirs
    assert mine.checkpoint["channel_values"] == {"who": "default"}
    assert theirs.checkpoint["channel_values"] == {"who": "b"}
    await other.adelete_thread("shared-id")
    assert await saver.aget_tuple(cfg("shared-id")) is not None
    assert await other.aget_tuple(cfg("shared-id")) is None


async def test_encryption_at_rest(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine, serde=make_serde(KEY))
    config = await put(
        saver, cfg("enc"), {"short": SECRET, "long": [SECRET] * 3}, {"short": "1", "long": "1"}
    )
    await saver.aput_writes(config, [("long", SECRET)], "task")
    tup = await saver.aget_tuple(config)
    assert tup is not None and tup.checkpoint["channel_values"]["short"] == SECRET
    assert tup.pending_writes == [("task", "long", SECRET)]
    async with engine.connect() as conn:
        raw = [
            bytes(value)
            for table, column in (
                (checkpoints, checkpoints.c.checkpoint),
                (checkpoint_blobs, checkpoint_blobs.c.blob),
                (checkpoint_writes, checkpoint_writes.c.blob),
            )
            for value in (await conn.execute(select(column))).scalars()
        ]
    assert len(raw) == 3
    assert all(SECRET.encode() not in value for value in raw)

    wrong = SQLSaver(engine, serde=make_serde("f" * 32))
    with pytest.raises(DecryptionFailed, match="not the key"):
        await wrong.aget_tuple(config)
    unkeyed = SQLSaver(engine)
    with pytest.raises(DecryptionFailed, match="set GRAPHKEEP_ENCRYPTION_KEY"):
        await unkeyed.aget_tuple(config)


def test_encryption_key_formats() -> None:
    raw = bytes(range(32))
    assert parse_key("base64:" + base64.b64encode(raw).decode()) == raw
    assert parse_key(base64.b64encode(raw).decode()) == raw
    assert parse_key("k" * 16) == b"k" * 16
    for bad in ("short", "k" * 20, "base64:!!!"):
        with pytest.raises(ValueError, match="16, 24 or 32 bytes"):
            make_serde(bad)


async def test_sync_methods_bridge_from_another_thread(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config = await put(saver, cfg("sync"), {"x": "y"}, {"x": "1"})

    def from_worker_thread() -> Any:
        tup = saver.get_tuple(config)
        listed = list(saver.list(cfg("sync")))
        saver.put_writes(config, [("x", "z")], "t")
        return tup, listed, saver.get_tuple(config)

    tup, listed, after = await asyncio.to_thread(from_worker_thread)
    assert tup.checkpoint["channel_values"] == {"x": "y"}
    assert len(listed) == 1
    assert after.pending_writes == [("t", "x", "z")]
    with pytest.raises(asyncio.InvalidStateError, match="only allowed from a different thread"):
        saver.get_tuple(config)
    with pytest.raises(asyncio.InvalidStateError, match="aput"):
        saver.put(config, empty_checkpoint(), {}, {})


@pytest.mark.parametrize(
    "thread_id", ["x" * 256, 12345, None, uuid4()], ids=["too-long", "int", "none", "uuid"]
)
async def test_bad_thread_ids_are_refused_before_writing(
    engine: AsyncEngine, thread_id: Any
) -> None:
    saver = SQLSaver(engine)
    bad: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for call in (
        lambda: put(saver, bad, {"a": "b"}, {"a": "1"}),
        lambda: saver.aget_tuple(bad),
        lambda: saver.aput_writes({**bad, "checkpoint_id": "x"}, [("a", 1)], "t"),
        lambda: saver.adelete_thread(thread_id),
        lambda: saver.acopy_thread(thread_id, "ok"),
    ):
        with pytest.raises(InvalidCheckpointInput, match="thread_id") as caught:
            await call()
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, InvalidInput)
    with pytest.raises(InvalidCheckpointInput):
        async for _ in saver.alist(bad):
            pass
    with pytest.raises(InvalidCheckpointInput):
        await saver.aprune("not-a-list")
    assert await count(engine, checkpoints) == 0
    assert await count(engine, checkpoint_blobs) == 0


_FAIL_TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER gk_test_fail BEFORE INSERT ON checkpoints WHEN NEW.thread_id = 'half' "
        "BEGIN SELECT RAISE(ABORT, 'checkpoint insert refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION gk_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.thread_id = 'half' THEN RAISE EXCEPTION 'checkpoint insert refused'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER gk_test_fail BEFORE INSERT ON checkpoints "
        "FOR EACH ROW EXECUTE FUNCTION gk_test_fail()",
    ],
}
_DROP_TRIGGER = {
    "sqlite": ["DROP TRIGGER IF EXISTS gk_test_fail"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS gk_test_fail ON checkpoints",
        "DROP FUNCTION IF EXISTS gk_test_fail()",
    ],
}


async def test_a_failed_put_leaves_nothing_half_written(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "x" * 65  # longer than the id column: refused before any SQL
    checkpoint["channel_values"] = {"big": [1, 2, 3]}
    checkpoint["channel_versions"] = {"big": "1"}
    with pytest.raises(InvalidCheckpointInput):
        await saver.aput(cfg("half"), checkpoint, {}, {"big": "1"})
    # the database refuses the checkpoint row after the blob rows were sent: all or nothing
    checkpoint["id"] = str(uuid6())
    dialect = engine.dialect.name
    async with engine.begin() as conn:
        for sql in _FAIL_TRIGGER[dialect]:
            await conn.exec_driver_sql(sql)
    try:
        with pytest.raises(DBAPIError, match="checkpoint insert refused"):
            await saver.aput(cfg("half"), checkpoint, {}, {"big": "1"})
    finally:
        async with engine.begin() as conn:
            for sql in _DROP_TRIGGER[dialect]:
                await conn.exec_driver_sql(sql)
    assert await count(engine, checkpoints) == 0
    assert await count(engine, checkpoint_blobs) == 0
    await saver.aput(cfg("half"), checkpoint, {}, {"big": "1"})
    assert await count(engine, checkpoint_blobs) == 1


async def test_copy_refuses_an_existing_target_and_copies_namespaces(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    root = await put(saver, cfg("src"), {"v": [1]}, {"v": "1"})
    await put(saver, cfg("src", ns="child:1"), {"v": [2]}, {"v": "1"})
    await saver.aput_writes(root, [("v", [3])], "task")
    await put(saver, cfg("busy"), {}, {})
    with pytest.raises(ThreadHasCheckpoints):
        await saver.acopy_thread("src", "busy")
    await saver.acopy_thread("src", "dst")
    copied = await saver.aget_tuple(cfg("dst"))
    child = await saver.aget_tuple(cfg("dst", ns="child:1"))
    assert copied and child
    assert copied.checkpoint["channel_values"] == {"v": [1]}
    assert copied.pending_writes == [("task", "v", [3])]
    assert child.checkpoint["channel_values"] == {"v": [2]}


async def test_prune_keep_latest_drops_unreferenced_blobs(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine)
    config = cfg("p")
    for i in range(5):
        config = await put(
            saver,
            config,
            {"v": [i], "same": ["s"]},
            {"v": str(i), "same": "1"},
            new={"v": str(i), "same": "1"} if i == 0 else {"v": str(i)},
        )
        await saver.aput_writes(config, [("v", i)], f"t{i}")
    await saver.aprune(["p"], strategy="keep_latest")
    remaining = [t async for t in saver.alist(cfg("p"))]
    assert len(remaining) == 1
    assert remaining[0].checkpoint["channel_values"] == {"v": [4], "same": ["s"]}
    assert remaining[0].parent_config is None
    assert remaining[0].pending_writes == [("t4", "v", 4)]
    assert await count(engine, checkpoint_blobs, "p") == 2
    assert await count(engine, checkpoint_writes, "p") == 1
    with pytest.raises(InvalidCheckpointInput, match="strategy"):
        await saver.aprune(["p"], strategy="everything")


async def test_from_url_owns_its_engine_and_sets_up(db_url: str) -> None:
    async with SQLSaver.from_url(db_url, tenant_id="lib-user", encryption_key=KEY) as saver:
        await saver.setup()  # already at head: a no-op
        config = await put(saver, cfg(str(uuid4())), {"x": SECRET}, {"x": "1"})
        tup = await saver.aget_tuple(config)
        assert tup is not None and tup.checkpoint["channel_values"] == {"x": SECRET}
        await saver.adelete_thread(config["configurable"]["thread_id"])
    assert saver.engine.pool.checkedout() == 0


async def test_list_pages_agree_with_get(engine: AsyncEngine) -> None:
    """A multi-page list (forks, writes, shared blobs, two namespaces) returns exactly what
    get_tuple returns for each checkpoint, newest first."""
    saver = SQLSaver(engine)
    config = cfg("big")
    fork_from = None
    for i in range(250):
        versions = {"every3": f"{i // 3:032}", "static": "1", "n": f"{i:032}"}
        values = {"every3": [i // 3], "static": {"s": 1}, "n": i}
        config = await put(saver, config, values, versions, step=i)
        if i % 7 == 0:
            await saver.aput_writes(config, [("w", i), ("x", [i])], f"task{i}", f"~{i}")
        if i == 100:
            fork_from = config
    assert fork_from is not None
    fork = await put(saver, fork_from, {"every3": ["fork"]}, {"every3": "fork-v"}, step=-5)
    await put(saver, cfg("big", ns="child:1"), {"every3": ["child"]}, {"every3": "c"}, step=0)

    listed = [t async for t in saver.alist(cfg("big"))]
    assert len(listed) == 250 + 1
    ids = [t.config["configurable"]["checkpoint_id"] for t in listed]
    assert ids == sorted(ids, reverse=True)
    for tup in listed:
        assert tup == await saver.aget_tuple(tup.config)
    assert fork["configurable"]["checkpoint_id"] in ids
    everything = [t async for t in saver.alist({"configurable": {"thread_id": "big"}})]
    assert len(everything) == 252
    filtered = [t async for t in saver.alist(cfg("big"), filter={"step": 14})]
    assert [t.metadata["step"] for t in filtered] == [14]
    assert filtered[0].pending_writes == [("task14", "w", 14), ("task14", "x", [14])]
    limited = [t async for t in saver.alist(cfg("big"), before=listed[10].config, limit=150)]
    assert limited == listed[11:161]

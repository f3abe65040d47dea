"""The fast path (app/db/direct.py) against the portable path (app/db/portable.py, SQLAlchemy
Core) on the same dialect: the same saver and Store operations give the same results, and
what one path wrote the other reads back identically. Plus the fast path's session settings:
its connections plan generically, and the engine's pool never sees that setting."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver
from app.db.direct import fast_executor
from app.db.park import PARK_SECONDS
from app.db.portable import PortableExecutor
from app.store import SQLStore


def cfg(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _checkpoint(step: int, parent: Any) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = {"messages": list(range(step)), "n": step}
    checkpoint["channel_versions"] = {"messages": str(step), "n": str(step)}
    return checkpoint


async def _history(saver: SQLSaver, thread_id: str) -> list[Any]:
    """Three checkpoints with writes, as a graph makes them; returns the configs."""
    config = cfg(thread_id)
    configs = []
    for step in range(1, 4):
        config = await saver.aput(
            config,
            _checkpoint(step, config),
            {"step": step, "source": "loop"},
            {"messages": str(step), "n": str(step)},
        )
        await saver.aput_writes(config, [("messages", [step]), ("n", step)], f"task-{step}")
        configs.append(config)
    return configs


def _shape(tup: Any) -> Any:
    """A checkpoint tuple without the ids that differ between two writers."""
    assert tup is not None
    checkpoint = {k: v for k, v in tup.checkpoint.items() if k not in ("id", "ts")}
    return (
        checkpoint,
        tup.metadata,
        [(task, channel, value) for task, channel, value in tup.pending_writes or []],
        tup.parent_config is None,
    )


async def test_saver_paths_agree_and_read_each_others_writes(engine: AsyncEngine) -> None:
    fast = SQLSaver(engine)
    core = SQLSaver(engine, executor=PortableExecutor(engine))
    fast_configs = await _history(fast, "t-fast")
    core_configs = await _history(core, "t-core")
    for saver in (fast, core):  # each reads both threads
        for mine, theirs in zip(fast_configs, core_configs, strict=True):
            a = await saver.aget_tuple(mine)
            b = await saver.aget_tuple(theirs)
            assert _shape(a) == _shape(b)
        latest_fast = await saver.aget_tuple(cfg("t-fast"))
        latest_core = await saver.aget_tuple(cfg("t-core"))
        assert _shape(latest_fast) == _shape(latest_core)
        assert latest_fast is not None and latest_fast.checkpoint["channel_values"]["n"] == 3
        listed_fast = [_shape(t) async for t in saver.alist(cfg("t-fast"), limit=2)]
        listed_core = [_shape(t) async for t in saver.alist(cfg("t-core"), limit=2)]
        assert listed_fast == listed_core and len(listed_fast) == 2
    # the same statements and rows: the two readers agree on every checkpoint
    for config in fast_configs + core_configs:
        assert _shape(await fast.aget_tuple(config)) == _shape(await core.aget_tuple(config))


async def test_store_paths_agree_and_read_each_others_writes(engine: AsyncEngine) -> None:
    fast = SQLStore(engine, tenant_id="fast")
    core = SQLStore(engine, tenant_id="core", executor=PortableExecutor(engine))
    await fast.setup()
    for store in (fast, core):
        for i in range(6):
            await store.aput(("users", f"u{i % 2}"), f"k{i}", {"n": i, "kind": "ab"[i % 2]})
        await store.adelete(("users", "u1"), "k5")
    for a, b in ((fast, core), (core, fast)):
        got_a = await a.aget(("users", "u0"), "k2")
        got_b = await b.aget(("users", "u0"), "k2")
        assert got_a is not None and got_b is not None and got_a.value == got_b.value
        assert await a.aget(("users", "u1"), "k5") is None
        found_a = await a.asearch(("users",), filter={"kind": "a", "n": {"$gte": 2}}, limit=10)
        found_b = await b.asearch(("users",), filter={"kind": "a", "n": {"$gte": 2}}, limit=10)
        assert sorted(i.key for i in found_a) == sorted(i.key for i in found_b) == ["k2", "k4"]
        assert await a.alist_namespaces() == await b.alist_namespaces()
    # a value the fast path wrote (bound raw, already encoded) reads back through Core
    core_view = SQLStore(engine, tenant_id="fast", executor=PortableExecutor(engine))
    read_back = await core_view.aget(("users", "u1"), "k3")
    assert read_back is not None and read_back.value == {"n": 3, "kind": "b"}


async def test_fast_path_plans_generically_without_leaking_the_setting(
    engine: AsyncEngine,
) -> None:
    if engine.dialect.name != "postgresql":
        return  # a PostgreSQL setting; SQLite has no plan cache to steer
    executor = fast_executor(engine)
    setting = executor.prepare(select(func.current_setting("plan_cache_mode").label("mode")))
    rows = await executor.fetch(setting, {})
    assert rows[0].mode == "force_generic_plan"
    await asyncio.sleep(PARK_SECONDS * 3)  # the parked connection goes back to the pool
    assert executor.pool.checkedout() == 0
    for _ in range(3):  # whichever pooled connection serves these: the server's default
        async with engine.connect() as conn:
            assert (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one() == "auto"


async def test_statements_without_session_settings_skip_them(engine: AsyncEngine) -> None:
    """The saver's per-run statements (`session_settings=False`) never SET/RESET the generic
    plan setting: a connection taken for them keeps PostgreSQL's choice, and one that has the
    setting serves them as it is; statements that need it still get it on any connection."""
    if engine.dialect.name != "postgresql":
        return
    executor = fast_executor(engine)
    query = select(func.current_setting("plan_cache_mode").label("mode"))
    plain = executor.prepare(query, session_settings=False)
    generic = executor.prepare(query)
    pid = executor.prepare(select(func.pg_backend_pid().label("pid")), session_settings=False)

    assert (await executor.fetch(plain, {}))[0].mode == "auto"  # no SET on the way
    first = (await executor.fetch(pid, {}))[0].pid
    assert (await executor.fetch(generic, {}))[0].mode == "force_generic_plan"
    # the same parked connection (one unit at a time): set now, and served as it is
    assert (await executor.fetch(pid, {}))[0].pid == first
    assert (await executor.fetch(plain, {}))[0].mode == "force_generic_plan"
    assert [settled for _pooled, settled in executor.parked.items] == [True]
    await asyncio.sleep(PARK_SECONDS * 3)  # idled out: RESET, then back to the pool
    assert executor.pool.checkedout() == 0
    for _ in range(3):
        async with engine.connect() as conn:
            assert (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one() == "auto"
    # a connection parked without the setting returns without a RESET and never had it
    assert (await executor.fetch(plain, {}))[0].mode == "auto"
    assert [settled for _pooled, settled in executor.parked.items] == [False]
    await asyncio.sleep(PARK_SECONDS * 3)
    assert executor.pool.checkedout() == 0

"""The Store's direct path (app/store/direct.py): compiled statements per shape, atomic write
units, driver errors and lost connections, pool reuse."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp
from sqlalchemy import event, text
from sqlalchemy.events import ConnectionEvents
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.dialect import autocommits
from app.db.engine import create_engine
from app.db.park import PARK_MAX, PARK_SECONDS
from app.main import create_app
from app.store import SQLStore
from app.store import direct as store_direct
from tests.conftest import terminate_backends

_CONNECTION_EVENTS = [n for n in vars(ConnectionEvents) if n[0] != "_" and n != "dispatch"]


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def store(engine: AsyncEngine) -> SQLStore:
    return SQLStore(engine, clock=StepClock())


async def all_returned(engine: AsyncEngine, store: SQLStore) -> bool:
    """Whether every connection is back in the engine's pool (the only one: the store's
    direct statements use it too) once parked ones have idled out."""
    await asyncio.sleep(PARK_SECONDS * 3)
    return engine.pool.checkedout() == 0 and store._shared.direct.executor.pool is engine.pool


async def test_a_search_is_compiled_once_per_filter_shape(store: SQLStore) -> None:
    ns = ("users", "u1")
    await store.abatch([PutOp(ns, f"k{i}", {"n": i, "kind": "ab"[i % 2]}) for i in range(10)])
    direct = store._shared.direct
    before = direct.search_shapes
    # same shape (one `$gt` on n), other values: one statement (one batch: one updated_at,
    # so key order)
    assert [i.key for i in await store.asearch(ns, filter={"n": {"$gt": 7}})] == ["k8", "k9"]
    assert len(await store.asearch(ns, filter={"n": {"$gt": 2}})) == 7
    assert direct.search_shapes == before + 1
    # another shape: another statement; SQLite's literal IN lists are expanded in it
    found = await store.asearch(ns, filter={"kind": "a", "n": {"$lte": 4}})
    assert sorted(i.key for i in found) == ["k0", "k2", "k4"]
    assert direct.search_shapes == before + 2
    # a tenant view shares the compiled statements (the tenant is a parameter) and sees
    # nothing of the default tenant
    assert await store.for_tenant("other").asearch(ns, filter={"n": {"$gt": 2}}) == []
    assert direct.search_shapes == before + 2


async def test_the_search_cache_is_bounded(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_direct, "SEARCH_CACHE_SIZE", 2)
    await store.aput(("a",), "k", {"x": 1, "y": 2, "z": 3})
    for key in ("x", "y", "z", "x"):
        assert len(await store.asearch(("a",), filter={key: {"$gte": 1}})) == 1
    assert store._shared.direct.search_shapes == 2


async def test_gets_of_any_count_pad_to_few_statements(
    engine: AsyncEngine, store: SQLStore
) -> None:
    ns = ("g",)
    await store.abatch([PutOp(ns, f"k{i}", {"i": i}) for i in range(130)])
    statements: list[str] = []

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _record(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    for count in (1, 3, 64, 65, 130):
        statements.clear()
        # every key twice and one missing key per ten: results follow the ops
        keys = [f"k{i}" if i % 10 else "missing" for i in range(count)]
        ops = [GetOp(ns, key) for key in keys + keys]
        results = await store.abatch(ops)
        expected = [None if k == "missing" else {"i": int(k[1:])} for k in keys + keys]
        assert [r.value if r else None for r in results] == expected
        distinct = len(set(keys))
        assert len(statements) == -(-distinct // store_direct.MAX_GET_SLOTS)


_REFUSE = {
    "sqlite": [
        "CREATE TRIGGER gk_refuse_bad BEFORE INSERT ON store_items WHEN NEW.key = 'bad' "
        "BEGIN SELECT RAISE(ABORT, 'item bad refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION gk_refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.key = 'bad' THEN RAISE EXCEPTION 'item bad refused'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER gk_refuse_bad BEFORE INSERT ON store_items "
        "FOR EACH ROW EXECUTE FUNCTION gk_refuse_bad()",
    ],
}
_ALLOW = {
    "sqlite": ["DROP TRIGGER IF EXISTS gk_refuse_bad"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS gk_refuse_bad ON store_items",
        "DROP FUNCTION IF EXISTS gk_refuse_bad()",
    ],
}


async def test_a_write_the_database_refuses_leaves_the_batch_unwritten(
    engine: AsyncEngine, store: SQLStore
) -> None:
    ns = ("w",)
    await store.abatch([PutOp(ns, "keep", {"v": 1}, ttl=5), PutOp(ns, "old", {"v": 1})])
    keep = await store.aget(ns, "keep")
    assert keep is not None
    dialect = engine.dialect.name
    async with engine.begin() as conn:
        for sql in _REFUSE[dialect]:
            await conn.exec_driver_sql(sql)
    try:
        # one upsert of several rows (PostgreSQL: one pipelined statement)
        with pytest.raises(DBAPIError, match="item bad refused"):
            await store.abatch([PutOp(ns, "new", {"v": 2}), PutOp(ns, "bad", {"v": 2})])
        # a delete, a TTL refresh and an upsert (one transaction)
        with pytest.raises(DBAPIError, match="item bad refused"):
            await store.abatch(
                [
                    GetOp(ns, "keep", refresh_ttl=True),
                    PutOp(ns, "old", None),
                    PutOp(ns, "keep", {"v": 3}),
                    PutOp(ns, "bad", {"v": 3}),
                ]
            )
    finally:
        async with engine.begin() as conn:
            for sql in _ALLOW[dialect]:
                await conn.exec_driver_sql(sql)
    assert store._shared.direct.executor.pool.checkedout() == 0  # failed: returned
    # nothing of either batch was written: the pooled connections still work
    assert await store.aget(ns, "new") is None
    assert await store.aget(ns, "bad") is None
    old = await store.aget(ns, "old")
    assert old is not None and old.value == {"v": 1}
    again = await store.aget(ns, "keep", refresh_ttl=False)
    assert again is not None and again.value == {"v": 1}
    assert again.updated_at == keep.updated_at
    async with engine.connect() as conn:
        expires = (
            await conn.execute(text("SELECT expires_at FROM store_items WHERE key = 'keep'"))
        ).scalar_one()
    refreshed = await store.abatch([GetOp(ns, "keep", refresh_ttl=True)])
    assert refreshed[0] is not None
    async with engine.connect() as conn:
        later = (
            await conn.execute(text("SELECT expires_at FROM store_items WHERE key = 'keep'"))
        ).scalar_one()
    assert later != expires  # the refresh the failed batch would have made runs now
    await store.aput(ns, "bad", {"v": 4})
    got = await store.aget(ns, "bad")
    assert got is not None and got.value == {"v": 4}


async def test_a_lost_connection_fails_the_op_and_the_pool_recovers(engine: AsyncEngine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("terminating a backend is PostgreSQL only")
    store = SQLStore(engine)
    ns = ("lost",)
    await store.aput(ns, "k", {"v": 1})
    assert await terminate_backends(engine) >= 1
    failed = 0
    for i in range(engine.pool.size() + 2):  # every pooled connection may have been killed
        op = store.aput(ns, "k", {"v": 2}) if i % 2 else store.aget(ns, "k")
        try:
            await op
        except DBAPIError as exc:
            assert exc.connection_invalidated
            failed += 1
    assert failed >= 1
    await store.aput(ns, "k", {"v": 3})
    got = await store.aget(ns, "k")
    assert got is not None and got.value == {"v": 3}
    assert await all_returned(engine, store)


async def test_concurrent_batches_share_the_pool(engine: AsyncEngine, store: SQLStore) -> None:
    ns = ("c",)

    async def one(i: int) -> None:
        await store.abatch([PutOp(ns, f"k{i}", {"i": i})])
        results = await store.abatch(
            [GetOp(ns, f"k{i}"), SearchOp(ns, filter={"i": i}), GetOp(ns, "none")]
        )
        assert results[0] is not None and results[0].value == {"i": i}
        assert [item.key for item in results[1]] == [f"k{i}"]

    await asyncio.gather(*(one(i) for i in range(40)))
    assert len(await store.asearch(ns, limit=100)) == 40
    assert store._shared.direct.executor.pool.checkedout() <= PARK_MAX
    assert await all_returned(engine, store)


async def test_a_connection_is_parked_between_ops_then_returned(
    engine: AsyncEngine, store: SQLStore
) -> None:
    opened: list[object] = []
    pool = store._shared.direct.executor.pool

    @event.listens_for(pool, "connect")
    def _opened(dbapi_conn: object, record: object) -> None:
        opened.append(dbapi_conn)

    ns = ("p",)
    for i in range(20):  # one connection serves every op, without a pool checkout
        await store.aput(ns, f"k{i}", {"i": i})
        assert (await store.aget(ns, f"k{i}")) is not None
        assert pool.checkedout() == 1
    assert len(opened) <= 1
    assert await all_returned(engine, store)  # idle: back in the pool
    assert len(await store.asearch(ns, limit=50)) == 20


async def test_dispose_closes_parked_connections(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        store = SQLStore(engine)
        await store.aput(("d",), "k", {"v": 1})
        executor = store._shared.direct.executor
        parked = [pooled for pooled, _settled in executor.parked.items]
        assert len(parked) == 1
    finally:
        await store.adelete(("d",), "k")
        await engine.dispose()
    # closed with the engine, not left open for the garbage collector
    assert executor.parked.items == []
    assert not parked[0].is_valid


@pytest.mark.postgres
async def test_the_servers_engine_has_no_connection_event_listeners(pg_url: str) -> None:
    """The server's fast path is closed by its owner (`AppState.close`), not by a listener on
    `engine.dispose()`: any connection-event listener on the engine makes SQLAlchemy dispatch
    every connection event of every Core statement (about a sixth of a one-row read's CPU).
    Its parked connections still go back before the engine is disposed."""
    app = create_app(Settings(database_url=pg_url, workers=0))
    async with app.router.lifespan_context(app):
        state = app.state.graphkeep
        engine = state.engine.sync_engine
        listened = [name for name in _CONNECTION_EVENTS if getattr(engine.dispatch, name)]
        assert listened == []
        assert autocommits(state.engine)  # and its reads switch no isolation level
        await state.store.aput(("owner",), "k", {"v": 1})  # through the fast path: parks
        await state.store.adelete(("owner",), "k")
        assert state.direct.parked.items
        pool = state.direct.pool
    assert state.direct.parked.items == [] and pool.checkedout() == 0


async def test_aclose_returns_parked_connections_and_waits_for_returns(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        store = SQLStore(engine)
        executor = store._shared.direct.executor
        await store.aput(("a",), "k1", {"v": 1})
        assert executor.pool.checkedout() == 1  # parked
        executor.parked._expire()  # nothing idle long enough yet: still parked
        assert executor.pool.checkedout() == 1
        await executor.aclose()
        assert executor.parked.items == [] and executor.pool.checkedout() == 0

        # a return already under way (the idle expiry's task) is waited for too
        await store.aput(("a",), "k2", {"v": 2})
        await asyncio.sleep(PARK_SECONDS)  # idle long enough, but the expiry not yet run:
        executor.parked._expire()  # run it now, its return still under way
        assert executor.parked._returning and executor.pool.checkedout() == 1
        await executor.aclose()
        assert not executor.parked._returning and executor.pool.checkedout() == 0
        # still usable: the next unit takes a connection from the pool
        assert (await store.aget(("a",), "k2")) is not None
        await store.adelete(("a",), "k1")
        await store.adelete(("a",), "k2")
    finally:
        await engine.dispose()


async def test_store_statements_plan_generically_on_postgresql(
    engine: AsyncEngine, store: SQLStore
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("plan_cache_mode is PostgreSQL's")
    await store.aput(("g",), "k", {"v": 1})
    executor = store._shared.direct.executor
    taken = executor.parked.take()
    assert taken is not None
    pooled, settled = taken
    assert settled  # the put's connection, parked with the setting
    try:
        mode = await pooled.driver_connection.fetchval("SHOW plan_cache_mode")  # type: ignore[union-attr]
    finally:
        await executor._return(
            pooled, settled
        )  # as when it idles out: RESET, then back to the pool
    assert mode == "force_generic_plan"
    assert engine.pool.checkedout() == 0
    async with engine.connect() as conn:  # the same pooled connection: PostgreSQL's choice
        assert (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one() == "auto"


async def test_equal_updated_at_orders_keys_by_code_point(store: SQLStore) -> None:
    # one batch: one updated_at, so the key decides, as Python (the in-memory store) orders
    # strings, whatever the database's collation
    keys = ["b", "B", "a", "A", "é", "Z", "_"]
    await store.abatch([PutOp(("o",), key, {"v": 1}) for key in keys])
    assert [item.key for item in await store.asearch(("o",))] == sorted(keys)
    assert [item.key for item in await store.asearch(())] == sorted(keys)

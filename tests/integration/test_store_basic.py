"""SQLStore on real PostgreSQL and SQLite: CRUD, order, filters, namespaces, tenants, batching."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.direct_statement import DirectStatement
from app.store import SQLStore


class StepClock:
    """A controlled clock: every call is one millisecond after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def store(engine: AsyncEngine) -> SQLStore:
    return SQLStore(engine, clock=StepClock())


async def test_put_get_update_keeps_created_at_and_delete(store: SQLStore) -> None:
    ns = ("users", "u1", "memories")
    assert await store.aget(ns, "k") is None
    await store.aput(ns, "k", {"text": "first", "n": 1})
    first = await store.aget(ns, "k")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (ns, "k", {"text": "first", "n": 1})
    assert first.created_at == first.updated_at
    await store.aput(ns, "k", {"text": "second"})
    second = await store.aget(ns, "k")
    assert second is not None and second.value == {"text": "second"}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    await store.adelete(ns, "k")
    assert await store.aget(ns, "k") is None
    await store.adelete(ns, "k")  # deleting a missing item is not an error


async def test_search_is_a_prefix_match_on_labels_newest_first(store: SQLStore) -> None:
    await store.aput(("a", "b"), "1", {"v": 1})
    await store.aput(("a", "b", "c"), "2", {"v": 2})
    await store.aput(("a", "bc"), "3", {"v": 3})  # sibling label, not below ("a", "b")
    await store.aput(("a", "b-x"), "4", {"v": 4})
    await store.aput(("z",), "5", {"v": 5})
    assert [i.key for i in await store.asearch(("a", "b"))] == ["2", "1"]
    assert [i.key for i in await store.asearch(("a",))] == ["4", "3", "2", "1"]
    assert [i.key for i in await store.asearch(())] == ["5", "4", "3", "2", "1"]
    assert [i.key for i in await store.asearch(("a", "b", "c", "d"))] == []
    await store.aput(("a", "b"), "1", {"v": 10})  # an update moves it to the front
    found = await store.asearch(("a",), limit=2)
    assert [i.key for i in found] == ["1", "4"]
    assert all(i.score is None for i in found)
    assert [i.key for i in await store.asearch(("a",), limit=2, offset=2)] == ["3", "2"]
    assert await store.asearch(("a",), offset=10) == []


async def test_same_updated_at_orders_by_key(engine: AsyncEngine) -> None:
    frozen = datetime(2026, 1, 1, tzinfo=UTC)
    store = SQLStore(engine, clock=lambda: frozen)
    await store.abatch([PutOp(("n",), k, {"x": 1}) for k in ("c", "a", "b")])
    assert [i.key for i in await store.asearch(("n",))] == ["a", "b", "c"]


FILTER_ITEMS: dict[str, dict[str, Any]] = {
    "a": {"n": 1, "s": "x", "flag": True, "nested": {"x": 1, "y": "p"}, "tags": ["t1", "t2"]},
    "b": {"n": 2.5, "s": "y", "flag": False, "nested": {"x": 2}, "tags": ["t1"]},
    "c": {"n": 3, "s": "x", "nested": {"x": 3, "deep": {"z": 0}}, "tags": []},
    "d": {"n": "3", "s": None, "nested": "flat"},
}


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"s": "x"}, "ac"),
        ({"n": 3}, "c"),  # the string "3" is not the number 3
        ({"n": "3"}, "d"),
        ({"n": 1.0}, "a"),  # numbers compare by value
        ({"flag": True}, "a"),
        ({"n": True}, ""),  # booleans are not numbers
        ({"s": None}, "d"),
        ({"s": {"$eq": "x"}}, "ac"),
        ({"s": {"$ne": "x"}}, "bd"),
        ({"flag": {"$ne": True}}, "bcd"),  # $ne matches a missing key
        ({"n": {"$gt": 1}}, "bc"),
        ({"n": {"$gte": 2.5}}, "bc"),
        ({"n": {"$lt": 3}}, "ab"),
        ({"n": {"$lte": 3, "$gt": 1}}, "bc"),
        ({"nested": {"x": 2}}, "b"),
        ({"nested": {"x": {"$gte": 2}}}, "bc"),
        ({"nested": {"deep": {"z": 0}}}, "c"),
        ({"nested": {"x": 1, "y": "p"}}, "a"),
        ({"nested": {"$eq": {"x": 2}}}, "b"),  # $eq compares the whole object
        ({"nested": {"$eq": {"x": 1}}}, ""),
        ({"nested": {"$ne": {"x": 2}}}, "acd"),
        ({"tags": ["t1"]}, "b"),
        ({"tags": []}, "c"),
        ({"tags": {"$eq": ["t1", "t2"]}}, "a"),
        ({"s": "x", "n": {"$gt": 1}}, "c"),
        ({"missing": {"$gt": 0}}, ""),
        ({}, "abcd"),
    ],
)
async def test_filters_run_in_sql(store: SQLStore, filter: dict[str, Any], expected: str) -> None:
    await store.abatch([PutOp(("f",), key, value) for key, value in FILTER_ITEMS.items()])
    found = await store.asearch(("f",), filter=filter, limit=100)
    assert "".join(sorted(i.key for i in found)) == expected


async def test_list_namespaces_prefix_suffix_wildcards_depth(store: SQLStore) -> None:
    for ns in [
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
        ("users", "u2", "memories"),
        ("users-x", "u9"),
        ("docs", "d1"),
        ("users",),
    ]:
        await store.aput(ns, "k", {"x": 1})
    assert await store.alist_namespaces() == [
        ("docs", "d1"),
        ("users",),
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
        ("users", "u2", "memories"),
        ("users-x", "u9"),
    ]
    assert await store.alist_namespaces(prefix=("users",)) == [
        ("users",),
        ("users", "u1", "memories"),
        ("users", "u1", "prefs"),
        ("users", "u2", "memories"),
    ]
    assert await store.alist_namespaces(prefix=("users", "*", "memories")) == [
        ("users", "u1", "memories"),
        ("users", "u2", "memories"),
    ]
    assert await store.alist_namespaces(suffix=("memories",)) == [
        ("users", "u1", "memories"),
        ("users", "u2", "memories"),
    ]
    assert await store.alist_namespaces(prefix=("users",), suffix=("prefs",)) == [
        ("users", "u1", "prefs")
    ]
    assert await store.alist_namespaces(max_depth=2) == [
        ("docs", "d1"),
        ("users",),
        ("users", "u1"),
        ("users", "u2"),
        ("users-x", "u9"),
    ]
    assert await store.alist_namespaces(max_depth=1, limit=2, offset=1) == [
        ("users",),
        ("users-x",),
    ]
    await store.adelete(("docs", "d1"), "k")  # an empty namespace disappears
    assert ("docs", "d1") not in await store.alist_namespaces()


async def test_tenants_never_see_each_other(store: SQLStore) -> None:
    acme, globex = store.for_tenant("acme"), store.for_tenant("globex")
    ns = ("users", "u1")
    await acme.aput(ns, "k", {"owner": "acme"})
    await globex.aput(ns, "k", {"owner": "globex"})
    a, g = await acme.aget(ns, "k"), await globex.aget(ns, "k")
    assert a is not None and a.value == {"owner": "acme"}
    assert g is not None and g.value == {"owner": "globex"}
    assert await store.aget(ns, "k") is None  # the "default" tenant
    assert [i.value for i in await acme.asearch(())] == [{"owner": "acme"}]
    assert await store.alist_namespaces() == []
    await globex.adelete(ns, "k")
    assert await globex.aget(ns, "k") is None
    still = await acme.aget(ns, "k")
    assert still is not None and still.value == {"owner": "acme"}


async def test_batch_results_in_order_reads_before_writes_last_put_wins(store: SQLStore) -> None:
    ns = ("b",)
    await store.aput(ns, "old", {"v": 0})
    results = await store.abatch(
        [
            PutOp(ns, "k", {"v": 1}),
            GetOp(ns, "old"),
            GetOp(ns, "k"),  # reads see the store as it was before this batch
            PutOp(ns, "k", {"v": 2}),
            SearchOp(ns, None, 10, 0),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("b",)),)),
            PutOp(ns, "old", None),
        ]
    )
    assert results[0] is None and results[3] is None and results[6] is None
    assert results[1] is not None and results[1].value == {"v": 0}
    assert results[2] is None
    assert [i.key for i in results[4]] == ["old"]
    assert results[5] == [("b",)]
    got = await store.aget(ns, "k")
    assert got is not None and got.value == {"v": 2}
    assert await store.aget(ns, "old") is None


def _count_statements(engine: AsyncEngine) -> list[str]:
    statements: list[str] = []

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.startswith(("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")):
            statements.append(statement)

    return statements


async def test_a_batch_of_gets_is_one_query_and_puts_are_one_upsert(
    engine: AsyncEngine, store: SQLStore
) -> None:
    ns = ("batch",)
    statements = _count_statements(engine)
    await store.abatch([PutOp(ns, f"k{i}", {"i": i}) for i in range(50)])
    assert len(statements) == 1, statements  # one multi-row upsert
    statements.clear()
    results = await store.abatch([GetOp(ns, f"k{i}") for i in range(0, 60, 2)])
    assert len(statements) == 1, statements
    assert [r.value["i"] if r else None for r in results] == [
        *range(0, 50, 2),
        *([None] * 5),
    ]
    statements.clear()
    await store.abatch([PutOp(ns, f"k{i}", None) for i in range(50)])
    assert len(statements) == 2, statements  # vectors of deleted items, then the items
    assert await store.asearch(ns) == []


async def test_sync_bridge_from_a_thread_and_guard_on_the_loop(store: SQLStore) -> None:
    await store.aput(("s",), "k", {"x": 1})

    def in_thread() -> Any:
        store.put(("s",), "k2", {"x": 2})
        return store.get(("s",), "k2")

    item = await asyncio.to_thread(in_thread)
    assert item is not None and item.value == {"x": 2}
    with pytest.raises(asyncio.InvalidStateError, match="await store.aget"):
        store.get(("s",), "k")


async def test_sync_bridge_works_for_a_store_built_off_the_loop(engine: AsyncEngine) -> None:
    # the server builds its store in a worker thread; graphs get views made in the loop
    store = await asyncio.to_thread(SQLStore, engine)
    view = store.for_tenant("acme")
    await asyncio.to_thread(view.put, ("s",), "k", {"x": 3})
    item = await view.aget(("s",), "k")
    assert item is not None and item.value == {"x": 3}


async def test_from_url_owns_its_engine(db_url: str) -> None:
    async with SQLStore.from_url(db_url, tenant_id="from-url") as store:
        await store.aput(("x",), "k", {"v": 1})
        got = await store.aget(("x",), "k")
        assert got is not None and got.value == {"v": 1}
        await store.adelete(("x",), "k")
    assert store.engine.pool.checkedout() == 0


async def _plan(engine: AsyncEngine, stmt: Any, params: dict[str, Any]) -> str:
    # EXPLAIN the statement as the store sends it: compiled for the fast path (the driver's
    # placeholders, each value through its bind processor)
    direct = DirectStatement(stmt, engine)
    sql, values = direct.sql, tuple(direct.args(params))
    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("ANALYZE store_items"))
            rows = await conn.exec_driver_sql(f"EXPLAIN {sql}", values)
        else:
            rows = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", values)
        return "\n".join(str(row[-1]) for row in rows)


async def test_prefix_and_filtered_search_use_the_primary_key_index(
    engine: AsyncEngine, store: SQLStore
) -> None:
    from app.store import queries

    await store.abatch(
        [PutOp(("users", f"u{i % 200}", "mem"), f"k{i}", {"n": i}) for i in range(4000)]
    )
    now = datetime(2026, 1, 2, tzinfo=UTC)
    for filter in (None, {"n": {"$gt": 10}, "kind": "a"}):
        stmt, params = queries.search_items(
            engine.dialect, "default", "users.u7", filter, now, limit=10, offset=0
        )
        plan = await _plan(engine, stmt, params)
        # the primary key (tenant_id, prefix, key): "sqlite_autoindex_store_items_1" on SQLite
        assert "pk_store_items" in plan or "sqlite_autoindex_store_items" in plan, plan
        assert "prefix" in plan or "Index Cond" in plan, plan
        assert "Seq Scan" not in plan and "SCAN store_items" not in plan, plan

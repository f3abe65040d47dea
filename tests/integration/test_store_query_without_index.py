"""A search with a `query` on a Store without `store.index` is the prefix search, as in
langgraph's own stores (InMemoryStore, PostgresStore): the query is ignored, scores are None."""

from __future__ import annotations

from langgraph.store.base import SearchOp
from langgraph.store.memory import InMemoryStore
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store import SQLStore


async def test_query_without_an_index_returns_the_prefix_search(engine: AsyncEngine) -> None:
    store = SQLStore(engine)
    reference = InMemoryStore()
    for target in (store, reference):
        await target.aput(("docs", "a"), "k1", {"text": "tea", "kind": "drink"})
        await target.aput(("docs", "b"), "k2", {"text": "coffee", "kind": "drink"})
        await target.aput(("other",), "k3", {"text": "tea"})

    plain = await store.asearch(("docs",), limit=10)
    queried = await store.asearch(("docs",), query="tea", limit=10)
    assert [(i.namespace, i.key) for i in queried] == [(i.namespace, i.key) for i in plain]
    assert {i.key for i in queried} == {"k1", "k2"}
    assert all(i.score is None for i in queried)
    expected = await reference.asearch(("docs",), query="tea", limit=10)
    assert {i.key for i in queried} == {i.key for i in expected}

    # with a filter and in a batch next to a plain search, in the batch's order
    op = SearchOp(("docs",), filter={"text": "coffee"}, limit=10, query="anything")
    filtered, everything = await store.abatch([op, SearchOp((), limit=10)])
    assert [i.key for i in filtered] == ["k2"]
    assert {i.key for i in everything} == {"k1", "k2", "k3"}

"""Bad input: each case is a clear InvalidInput / PayloadTooLarge and the store is unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import store_items
from app.errors import InvalidInput, PayloadTooLarge
from app.store import SQLStore

NS = ("users", "u1")


async def _snapshot(engine: AsyncEngine) -> list[tuple[Any, ...]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(store_items.c.tenant_id, store_items.c.prefix, store_items.c.key).order_by(
                store_items.c.prefix, store_items.c.key
            )
        )
        return [tuple(r) for r in rows]


@pytest.fixture
async def store(engine: AsyncEngine) -> SQLStore:
    s = SQLStore(engine, max_value_bytes=1024)
    await s.aput(NS, "existing", {"v": 1})
    return s


BAD_BATCHES: list[tuple[str, list[Any], type[Exception], str]] = [
    ("empty namespace", [PutOp((), "k", {"v": 1})], InvalidInput, "cannot be empty"),
    ("dot in label", [PutOp(("a.b",), "k", {"v": 1})], InvalidInput, "periods"),
    ("empty label", [PutOp(("a", ""), "k", {"v": 1})], InvalidInput, "empty"),
    ("number label", [PutOp(("a", 7), "k", {"v": 1})], InvalidInput, "must be strings"),  # type: ignore[arg-type]
    ("NUL in label", [PutOp(("a\x00b",), "k", {"v": 1})], InvalidInput, "NUL"),
    ("non-dict value", [PutOp(NS, "k", ["not", "a", "dict"])], InvalidInput, "must be an object"),
    ("string value", [PutOp(NS, "k", "text")], InvalidInput, "must be an object"),
    ("oversized value", [PutOp(NS, "k", {"blob": "x" * 2000})], PayloadTooLarge, "limit"),
    ("NaN", [PutOp(NS, "k", {"n": float("nan")})], InvalidInput, "JSON"),
    ("not JSON", [PutOp(NS, "k", {"when": object()})], InvalidInput, "JSON"),
    ("NUL in value", [PutOp(NS, "k", {"s": "a\x00b"})], InvalidInput, "NUL"),
    ("NUL in key", [PutOp(NS, "k\x00", {"v": 1})], InvalidInput, "NUL"),
    ("non-string key", [PutOp(NS, 5, {"v": 1})], InvalidInput, "key"),
    ("zero ttl", [PutOp(NS, "k", {"v": 1}, ttl=0)], InvalidInput, "ttl"),
    ("index True", [PutOp(NS, "k", {"v": 1}, index=True)], InvalidInput, "index"),
    ("reserved root", [PutOp(("langgraph",), "k", {"v": 1})], InvalidInput, "reserved"),
    (
        "unknown operator",
        [SearchOp(NS, {"v": {"$regex": "x"}}, 10, 0)],
        InvalidInput,
        "unknown operator",
    ),
    ("range on string", [SearchOp(NS, {"v": {"$gt": "a"}}, 10, 0)], InvalidInput, "number"),
    ("range on bool", [SearchOp(NS, {"v": {"$lt": True}}, 10, 0)], InvalidInput, "number"),
    ("filter not dict", [SearchOp(NS, ["v"], 10, 0)], InvalidInput, "filter"),
    ("quote in key", [SearchOp(NS, {'a"b': 1}, 10, 0)], InvalidInput, "keys"),
    ("filter set", [SearchOp(NS, {"v": {1, 2}}, 10, 0)], InvalidInput, "JSON"),
    ("negative limit", [SearchOp(NS, None, -1, 0)], InvalidInput, "limit"),
    ("negative offset", [SearchOp(NS, None, 10, -1)], InvalidInput, "offset"),
    (
        "bad max_depth",
        [ListNamespacesOp(match_conditions=None, max_depth=0)],
        InvalidInput,
        "max_depth",
    ),
    (
        "dot in prefix",
        [ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),))],
        InvalidInput,
        "periods",
    ),
    ("empty get namespace", [GetOp((), "k")], InvalidInput, "cannot be empty"),
]


@pytest.mark.parametrize(
    ("ops", "error", "message"),
    [pytest.param(ops, err, msg, id=name) for name, ops, err, msg in BAD_BATCHES],
)
async def test_bad_op_fails_clearly_and_changes_nothing(
    engine: AsyncEngine, store: SQLStore, ops: list[Any], error: type[Exception], message: str
) -> None:
    before = await _snapshot(engine)
    # a valid write in the same batch must not land either
    with pytest.raises(error, match=message):
        await store.abatch([PutOp(NS, "new", {"v": 2}), *ops, PutOp(NS, "existing", None)])
    assert await _snapshot(engine) == before
    item = await store.aget(NS, "existing")
    assert item is not None and item.value == {"v": 1}


async def test_public_methods_report_bad_namespaces_as_invalid_input(store: SQLStore) -> None:
    with pytest.raises(InvalidInput, match="periods"):
        await store.aput(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidInput, match="periods"):
        await store.aget(("a.b",), "k")
    with pytest.raises(InvalidInput, match="periods"):
        await store.asearch(("a.b",))
    with pytest.raises(InvalidInput, match="periods"):
        await store.alist_namespaces(prefix=("a.b",))
    with pytest.raises(InvalidInput, match="cannot be empty"):
        await store.aput((), "k", {"v": 1})


async def test_value_at_the_limit_is_accepted(store: SQLStore) -> None:
    value = {"blob": "x" * (1024 - len('{"blob": ""}'))}
    await store.aput(NS, "big", value)
    item = await store.aget(NS, "big")
    assert item is not None and item.value == value


def test_tenant_must_be_named(engine: AsyncEngine) -> None:
    with pytest.raises(InvalidInput):
        SQLStore(engine, tenant_id="")
    with pytest.raises(InvalidInput):
        SQLStore(engine).for_tenant("")

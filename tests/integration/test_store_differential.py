"""Differential property test: random op sequences on langgraph's InMemoryStore and SQLStore.

Each step is a small batch run through `abatch` on both stores; every result is compared.
Only one thing is normalised, where the documented orders differ: InMemoryStore returns
search results in insertion order, SQLStore newest `updated_at` first, then key. The test
therefore asks InMemoryStore for all matches and orders them by the write sequence it tracks
itself before applying offset / limit. Each example runs in its own tenant, so examples never
see each other.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore
from sqlalchemy import delete

from app.db.engine import create_engine
from app.db.tables import store_items, store_vectors
from app.store import SQLStore

LABELS = ["a", "b", "a-b", "c"]  # "a-b" sorts before "a.b" as text but after ("a",) as tuple
KEYS = ["k1", "k2", "k3"]

namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
values = st.fixed_dictionaries(
    {"n": st.integers(-3, 3), "s": st.sampled_from(["x", "y"])},
    optional={
        "tag": st.sampled_from(["red", "blue"]),
        "flag": st.booleans(),
        "nested": st.fixed_dictionaries({"x": st.integers(0, 2)}),
        "list": st.lists(st.integers(0, 1), max_size=2),
    },
)
filters = st.one_of(
    st.none(),
    st.builds(lambda n: {"n": n}, st.integers(-3, 3)),
    st.builds(lambda n: {"n": {"$gt": n}}, st.integers(-3, 3)),
    st.builds(
        lambda lo, hi: {"n": {"$gte": lo, "$lt": hi}}, st.integers(-3, 3), st.integers(-3, 3)
    ),
    st.builds(lambda n: {"n": {"$lte": n}}, st.integers(-3, 3)),
    st.builds(lambda s: {"s": {"$ne": s}}, st.sampled_from(["x", "y"])),
    st.builds(lambda t: {"tag": t}, st.sampled_from(["red", "blue"])),
    st.builds(lambda t: {"tag": {"$ne": t}}, st.sampled_from(["red", "blue"])),
    st.builds(lambda b: {"flag": {"$eq": b}}, st.booleans()),
    st.builds(lambda x: {"nested": {"x": x}}, st.integers(0, 2)),
    st.builds(lambda x: {"nested": {"x": {"$gte": x}}}, st.integers(0, 2)),
    st.builds(lambda xs: {"list": xs}, st.lists(st.integers(0, 1), max_size=2)),
    st.builds(
        lambda s, n: {"s": s, "n": {"$lt": n}}, st.sampled_from(["x", "y"]), st.integers(-3, 3)
    ),
)
paths = st.lists(st.sampled_from([*LABELS, "*"]), min_size=1, max_size=2).map(tuple)
conditions = st.lists(
    st.builds(lambda t, p: MatchCondition(t, p), st.sampled_from(["prefix", "suffix"]), paths),
    max_size=2,
).map(tuple)

# explicit lambdas: st.builds would also draw the ops' optional fields (ttl, index, query)
ops = st.one_of(
    st.builds(lambda n, k, v: PutOp(n, k, v), namespaces, st.sampled_from(KEYS), values),
    st.builds(lambda n, k: PutOp(n, k, None), namespaces, st.sampled_from(KEYS)),  # delete
    st.builds(lambda n, k: GetOp(n, k), namespaces, st.sampled_from(KEYS)),
    st.builds(
        lambda p, f, limit, offset: SearchOp(p, f, limit, offset),
        st.lists(st.sampled_from(LABELS), max_size=2).map(tuple),
        filters,
        st.integers(1, 5),
        st.integers(0, 3),
    ),
    st.builds(
        lambda c, depth, limit, offset: ListNamespacesOp(c, depth, limit, offset),
        conditions,
        st.one_of(st.none(), st.integers(1, 3)),
        st.integers(1, 6),
        st.integers(0, 2),
    ),
)
programs = st.lists(st.lists(ops, min_size=1, max_size=3), min_size=1, max_size=12)


def _item(item: Item | None) -> Any:
    return None if item is None else (item.namespace, item.key, item.value)


class Model:
    """The write sequence per item: what "newest updated_at first" means for the reference."""

    def __init__(self) -> None:
        self.seq: dict[tuple[tuple[str, ...], str], int] = {}
        self.tick = 0

    def expected_search(self, full: list[Item], op: SearchOp) -> list[Any]:
        # SQLStore's documented tie-break: key, then the dot-joined namespace
        ordered = sorted(
            full, key=lambda i: (-self.seq[(i.namespace, i.key)], i.key, ".".join(i.namespace))
        )
        return [_item(i) for i in ordered[op.offset : op.offset + op.limit]]

    def record(self, batch: list[Op]) -> None:
        self.tick += 1  # one batch, one timestamp: its puts tie on updated_at
        for op in batch:
            if isinstance(op, PutOp):
                if op.value is None:
                    self.seq.pop((op.namespace, op.key), None)
                else:
                    self.seq[(op.namespace, op.key)] = self.tick


async def _run(url: str, program: list[list[Op]]) -> None:
    engine = create_engine(url, null_pool=True)
    tenant = f"diff-{uuid.uuid4().hex}"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    calls = iter(range(10**6))
    sql = SQLStore(engine, tenant_id=tenant, clock=lambda: start + timedelta(seconds=next(calls)))
    ref = InMemoryStore()
    model = Model()
    try:
        for batch in program:
            got = await sql.abatch(batch)
            # reference results: searches ask for everything, then the documented order applies
            unbounded = [
                op._replace(limit=10**6, offset=0) if isinstance(op, SearchOp) else op
                for op in batch
            ]
            # InMemoryStore keeps an empty namespace after a delete, and even after a get of a
            # missing item (defaultdict); it is not a namespace of any item, so list namespaces
            # on a pruned copy first (reads of a batch see the pre-batch state in both stores)
            for empty in [ns for ns, items in ref._data.items() if not items]:
                del ref._data[empty]
            listings = [op for op in batch if isinstance(op, ListNamespacesOp)]
            listed = iter(await ref.abatch(listings))
            rest = iter(await ref.abatch([op for op in unbounded if op not in listings]))
            want = [
                next(listed) if isinstance(op, ListNamespacesOp) else next(rest) for op in batch
            ]
            for op, mine, theirs in zip(batch, got, want, strict=True):
                if isinstance(op, GetOp):
                    assert _item(mine) == _item(theirs), op
                elif isinstance(op, SearchOp):
                    assert [_item(i) for i in mine] == model.expected_search(theirs, op), op
                elif isinstance(op, ListNamespacesOp):
                    assert mine == theirs, op
                else:
                    assert mine is None and theirs is None
            model.record(batch)
    finally:
        async with engine.begin() as conn:
            await conn.execute(delete(store_vectors).where(store_vectors.c.tenant_id == tenant))
            await conn.execute(delete(store_items).where(store_items.c.tenant_id == tenant))
        await engine.dispose()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs)
def test_sqlstore_matches_inmemorystore(db_url: str, program: list[list[Op]]) -> None:
    asyncio.run(_run(db_url, program))

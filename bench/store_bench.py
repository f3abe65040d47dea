"""SQLStore vs langgraph's AsyncPostgresStore on the same PostgreSQL server.

Each store gets a throwaway database per size. Items live in per-user namespaces
("users", "u<n>", "memories"), 100 items each, so a namespace search touches the same number
of rows at every size; flat latency from 10k to 100k items shows the index doing the work.

    python bench/store_bench.py [--sizes 10000 100000] [--repeat 200]
    GRAPHKEEP_BENCH_PG=postgresql://postgres@127.0.0.1:5432/postgres  (admin URL)

Prints per-op medians (ms), the ratio official / SQLStore (> 1: SQLStore faster) and the
EXPLAIN ANALYZE plans of SQLStore's prefix and filtered searches at the largest size: the
statements exactly as SQLStore sends them, as custom and as generic plans (a prepared
statement may switch to its generic plan after five executions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from sqlalchemy.engine import make_url

from app.db.engine import create_engine
from app.db.portable import PortableExecutor
from app.store import SQLStore, queries

ADMIN = os.environ.get("GRAPHKEEP_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PER_NAMESPACE = 100
Key = TypeVar("Key")
LOAD_BATCH = 2000
FILTER = {"kind": "a", "n": {"$gte": 50}}


def _value(i: int) -> dict[str, Any]:
    return {
        "text": f"memory number {i} about topic {i % 37}",
        "n": i % PER_NAMESPACE,
        "kind": "a" if i % 2 else "b",
        "meta": {"source": "bench", "i": i},
    }


def _namespace(i: int) -> tuple[str, ...]:
    return ("users", f"u{i // PER_NAMESPACE}", "memories")


async def _admin(sql: str) -> None:
    await _admin_on(ADMIN, sql)


async def _admin_on(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _load(store: BaseStore, start: int, stop: int) -> None:
    for lo in range(start, stop, LOAD_BATCH):
        hi = min(lo + LOAD_BATCH, stop)
        await store.abatch([PutOp(_namespace(i), f"k{i}", _value(i)) for i in range(lo, hi)])


async def _medians_ms(
    fns: dict[Key, Callable[[], Awaitable[Any]]], repeat: int
) -> dict[Key, float]:
    """Median latency of each store's op, sampled alternately so that load on the (shared)
    machine hits every store alike."""
    for _ in range(min(20, repeat)):  # warm caches and prepared plans
        for fn in fns.values():
            await fn()
    samples: dict[Key, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    for round_ in range(repeat):
        for name, fn in order if round_ % 2 else reversed(order):
            t0 = time.perf_counter()
            await fn()
            samples[name].append((time.perf_counter() - t0) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def _ops(store: BaseStore, size: int, rng: random.Random) -> dict[str, Callable[[], Any]]:
    users = size // PER_NAMESPACE

    def pick() -> int:
        return rng.randrange(size)

    async def put() -> None:
        i = pick()
        await store.aput(_namespace(i), f"k{i}", _value(i))

    async def get() -> None:
        i = pick()
        assert await store.aget(_namespace(i), f"k{i}") is not None

    async def prefix_search() -> None:
        found = await store.asearch(("users", f"u{rng.randrange(users)}"), limit=10)
        assert len(found) == 10

    async def filtered_search() -> None:
        ns = ("users", f"u{rng.randrange(users)}")
        await store.asearch(ns, filter=FILTER, limit=10)

    async def list_namespaces() -> None:
        found = await store.alist_namespaces(prefix=("users",), limit=100)
        assert len(found) == min(100, users)

    return {
        "put": put,
        "get": get,
        "prefix_search": prefix_search,
        "filtered_search": filtered_search,
        "list_namespaces": list_namespaces,
    }


def _literal(value: Any) -> str:
    """A driver argument as a SQL literal (text[] paths as array literals)."""
    if value is None:
        return "NULL"
    if isinstance(value, list):
        value = "{" + ",".join(json.dumps(str(v)) for v in value) + "}"
    return "'" + str(value).replace("'", "''") + "'"


@asynccontextmanager
async def _portable_store(url: str) -> AsyncIterator[SQLStore]:
    """SQLStore with its statements on SQLAlchemy Core instead of the fast path."""
    engine = create_engine(url)
    try:
        store = SQLStore(engine, executor=PortableExecutor(engine))
        await store.setup()
        yield store
    finally:
        await engine.dispose()


async def _explain(store: SQLStore, url: str) -> None:
    """EXPLAIN ANALYZE the prefix and filtered searches exactly as SQLStore sends them (its
    compiled statement, the driver's arguments), as a custom plan and as the generic plan
    PostgreSQL may switch a prepared statement to after five executions."""
    direct = store._shared.direct  # the compiled statements (app/store/direct.py)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE store_items")
        now = datetime.now(UTC)
        for label, flt in (("prefix search", None), ("filtered search", FILTER)):
            leaves, params = queries.search_params("default", "users.u7", flt, now)
            statement = direct.search(True, leaves)
            args = statement.args({**params, "b_limit": 10, "b_offset": 0})
            # the arguments as SQL literals, coerced to the statement's parameter types
            literals = ", ".join(_literal(a) for a in args)
            await conn.execute(f"PREPARE gk_explain AS {statement.sql}")
            try:
                for mode in ("custom", "generic"):
                    await conn.execute(f"SET plan_cache_mode = force_{mode}_plan")
                    plan = await conn.fetch(f"EXPLAIN ANALYZE EXECUTE gk_explain({literals})")
                    print(f"\nEXPLAIN ANALYZE SQLStore {label} ({mode} plan):")
                    for row in plan:
                        print(f"  {row[0]}")
            finally:
                await conn.execute("DEALLOCATE gk_explain")
    finally:
        await conn.close()


async def main(sizes: list[int], repeat: int, portable: bool = False) -> None:
    """Each store at each size in a database of its own, all loaded first; then every op is
    sampled on all of them in alternation, so the SQLStore / official ratio and the growth
    from the smallest to the largest size are both measured under the same load."""
    suffix = uuid.uuid4().hex[:8]
    kinds = ("sqlstore", "official")
    names = {(kind, size): f"gk_bench_{kind}_{size}_{suffix}" for kind in kinds for size in sizes}
    base = make_url(ADMIN)
    urls = {k: base.set(database=v).render_as_string(hide_password=False) for k, v in names.items()}
    for name in names.values():
        await _admin(f'CREATE DATABASE "{name}"')
    results: dict[int, dict[str, dict[str, float]]] = {
        size: {k: {} for k in kinds} for size in sizes
    }
    try:
        async with AsyncExitStack() as stack:
            stores: dict[tuple[str, int], BaseStore] = {}
            for (kind, size), url in urls.items():
                if kind == "sqlstore":
                    store: BaseStore = await stack.enter_async_context(SQLStore.from_url(url))
                elif portable:
                    store = await stack.enter_async_context(_portable_store(url))
                else:
                    official = await stack.enter_async_context(
                        AsyncPostgresStore.from_conn_string(url)
                    )
                    await official.setup()
                    store = official
                t0 = time.perf_counter()
                await _load(store, 0, size)
                print(f"loaded {kind} with {size} items in {time.perf_counter() - t0:.1f}s")
                await _admin_on(url, "VACUUM ANALYZE")
                stores[(kind, size)] = store
            per_store = {
                key: _ops(store, key[1], random.Random(42)) for key, store in stores.items()
            }
            for op in next(iter(per_store.values())):
                medians = await _medians_ms(
                    {key: ops[op] for key, ops in per_store.items()}, repeat
                )
                for (kind, size), value in medians.items():
                    results[size][kind][op] = value
            _report(results)
            largest = max(sizes)
            sql_store = stores[("sqlstore", largest)]
            assert isinstance(sql_store, SQLStore)
            await _explain(sql_store, urls[("sqlstore", largest)])
    finally:
        for name in names.values():
            await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _report(results: dict[int, dict[str, dict[str, float]]]) -> None:
    print(f"\n{'op':<18}{'items':>8}{'SQLStore ms':>14}{'official ms':>14}{'ratio':>8}")
    ops = next(iter(results.values()))["sqlstore"].keys()
    for op in ops:
        for size, by_store in sorted(results.items()):
            mine, theirs = by_store["sqlstore"][op], by_store["official"][op]
            print(f"{op:<18}{size:>8}{mine:>14.3f}{theirs:>14.3f}{theirs / mine:>8.2f}")
    sizes = sorted(results)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"\nGrowth {lo} -> {hi} items (median ratio, 1.0 = flat):")
        for op in ("prefix_search", "filtered_search"):
            grow = {k: results[hi][k][op] / results[lo][k][op] for k in ("sqlstore", "official")}
            print(f"  {op}: SQLStore x{grow['sqlstore']:.2f}, official x{grow['official']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument(
        "--portable",
        action="store_true",
        help="the 'official' column is SQLStore on SQLAlchemy Core (app/db/portable.py)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.sizes, args.repeat, args.portable))

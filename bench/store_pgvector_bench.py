"""Semantic search: SQLStore on pgvector vs SQLStore scoring in process vs langgraph's
AsyncPostgresStore (which also uses pgvector), on one PostgreSQL 16 + pgvector server.

The server is the pgserver wheel's build (a dev extra), started for the run unless
GRAPHKEEP_BENCH_PGVECTOR names an admin URL of a pgvector-enabled server. Each store gets its
own database with the same items: per-user namespaces ("users", "u<n>", "memories") of 100
items, texts of 8 words from a 400-word vocabulary embedded by the offline hashing embedder
(256 dims), `kind` "a" on 10% of items and "r" on 0.2%.

    python bench/store_pgvector_bench.py [--sizes 10000 50000] [--repeat 40]

Per size and operation: median latency (ms) of each store, measured interleaved (one call of
each store in turn, with the same query), the ratios, and recall@10 of the two pgvector stores
against the exact ranking (an item counts when its exact score reaches the 10th best).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import asyncpg
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db.engine import create_engine
from app.store import HashingEmbeddings, SQLStore
from tests.pgcluster import Cluster, free_port, pgserver_install

DIMS = 256
PER_NAMESPACE = 100
LOAD_BATCH = 1000
rng = random.Random(7)
VOCAB = [f"w{i}" for i in range(400)]


def _text(r: random.Random) -> str:
    return " ".join(r.choice(VOCAB) for _ in range(8))


def _value(i: int, r: random.Random) -> dict[str, Any]:
    kind = "r" if i % 500 == 0 else ("a" if i % 10 == 1 else "b")
    return {"text": _text(r), "kind": kind, "n": i}


def _index() -> dict[str, Any]:
    return {"dims": DIMS, "embed": HashingEmbeddings(DIMS), "fields": ["text"]}


async def _create_db(admin: str, name: str) -> str:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return admin.rsplit("/", 1)[0] + f"/{name}"


async def _load(stores: dict[str, BaseStore], size: int) -> dict[str, float]:
    r = random.Random(size)
    took = dict.fromkeys(stores, 0.0)
    for start in range(0, size, LOAD_BATCH):
        ops = [
            PutOp(("users", f"u{i // PER_NAMESPACE}", "memories"), f"m{i}", _value(i, r))
            for i in range(start, min(size, start + LOAD_BATCH))
        ]
        for name, store in stores.items():
            t0 = time.perf_counter()
            await store.abatch(ops)
            took[name] += time.perf_counter() - t0
    return took


def _recall(got: list[Any], exact: list[Any]) -> float:
    if not exact:
        return 1.0
    floor = min(i.score for i in exact) - 1e-6
    return sum(1 for i in got[: len(exact)] if (i.score or 0) >= floor) / len(exact)


async def _bench(stores: dict[str, BaseStore], size: int, repeat: int) -> dict[str, Any]:
    users = size // PER_NAMESPACE
    ops: dict[str, Callable[[BaseStore, str, int], Awaitable[Any]]] = {
        "all users, no filter": lambda s, q, k: s.asearch(("users",), query=q, limit=10),
        "one user": lambda s, q, k: s.asearch(("users", f"u{k}"), query=q, limit=10),
        "filter kind=a (10%)": lambda s, q, k: s.asearch(
            ("users",), query=q, filter={"kind": "a"}, limit=10
        ),
        "filter kind=r (0.2%)": lambda s, q, k: s.asearch(
            ("users",), query=q, filter={"kind": "r"}, limit=10
        ),
    }
    report: dict[str, Any] = {}
    for op_name, op in ops.items():
        times: dict[str, list[float]] = {name: [] for name in stores}
        recall: dict[str, list[float]] = {name: [] for name in stores}
        for _ in range(repeat):
            q = " ".join(rng.choice(VOCAB) for _ in range(3))
            k = rng.randrange(users)
            results = {}
            order = list(stores.items())
            rng.shuffle(order)
            for name, store in order:
                t0 = time.perf_counter()
                results[name] = await op(store, q, k)
                times[name].append(time.perf_counter() - t0)
            for name in stores:
                recall[name].append(_recall(results[name], results["portable"]))
        report[op_name] = {
            name: {
                "median_ms": statistics.median(times[name]) * 1000,
                "recall@10": statistics.mean(recall[name]),
            }
            for name in stores
        }
    # one put with a vector (the pgvector DB computes the column and updates HNSW)
    times = {name: [] for name in stores}
    r = random.Random(1)
    for rep in range(repeat):
        value = _value(size + rep, r)
        for name, store in stores.items():
            t0 = time.perf_counter()
            await store.aput(("users", "u0", "memories"), f"new{rep}", value)
            times[name].append(time.perf_counter() - t0)
    report["put (one item, one vector)"] = {
        name: {"median_ms": statistics.median(times[name]) * 1000} for name in stores
    }
    return report


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    admin = os.environ.get("GRAPHKEEP_BENCH_PGVECTOR")
    cluster = None
    if admin is None:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="gk_pgvbench_"))
        cluster = Cluster(pgserver_install(root), root, free_port())
        cluster.init()
        cluster.start()
        admin = cluster.url
    try:
        for size in args.sizes:
            async with AsyncExitStack() as stack:
                tag = uuid.uuid4().hex[:8]
                engines = {}
                urls: list[str] = []
                stores: dict[str, BaseStore] = {}
                for name, mode in (("pgvector", "auto"), ("portable", "off")):
                    url = await _create_db(admin, f"gk_bench_{name}_{tag}")
                    urls.append(url)
                    engine = create_engine(url, pool_size=4)
                    engines[name] = engine
                    stack.push_async_callback(engine.dispose)
                    store = SQLStore(engine, index=_index(), pgvector=mode)  # type: ignore[arg-type]
                    await store.setup()
                    assert store.uses_pgvector == (mode == "auto")
                    stores[name] = store
                official_url = await _create_db(admin, f"gk_bench_official_{tag}")
                urls.append(official_url)
                official = await stack.enter_async_context(
                    AsyncPostgresStore.from_conn_string(official_url, index=_index())  # type: ignore[arg-type]
                )
                await official.setup()
                stores["official"] = official
                took = await _load(stores, size)
                # steady state: no autovacuum of the fresh HNSW indexes during the measurement
                for url in urls:
                    conn = await asyncpg.connect(url)
                    try:
                        await conn.execute("VACUUM ANALYZE")
                    finally:
                        await conn.close()
                print(f"\n== {size} items; load seconds: "
                      + ", ".join(f"{n} {t:.1f}" for n, t in took.items()), flush=True)  # fmt: skip
                report = await _bench(stores, size, args.repeat)
                for op_name, row in report.items():
                    base = row["portable"]["median_ms"]
                    cells = []
                    for name, m in row.items():
                        cell = f"{name} {m['median_ms']:.2f} ms"
                        if "recall@10" in m and name != "portable":
                            cell += f" (recall {m['recall@10']:.2f})"
                        cells.append(cell)
                    ratio = base / row["pgvector"]["median_ms"]
                    off = row["official"]["median_ms"] / row["pgvector"]["median_ms"]
                    print(f"{op_name:28s} " + " | ".join(cells)
                          + f" | portable/pgvector {ratio:.2f}x, official/pgvector {off:.2f}x",
                          flush=True)  # fmt: skip
    finally:
        if cluster is not None:
            cluster.remove()


if __name__ == "__main__":
    asyncio.run(main())

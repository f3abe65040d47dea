"""Console benchmark: server time to render the console's heavy pages, and its asset weight.

- thread page of a thread with 1,000 and with 5,000 checkpoints: the page itself
  (GET /console/threads/{t}: current state, runs) and the first page of its checkpoint tree
  (GET /console/threads/{t}/tree, which htmx loads right after); both must stay flat, as
  neither reads more than one page of checkpoint headers nor any blob but the head's;
- overview with 100,000 threads: the thread list partial (search, sorted by updated_at,
  first page) and the live stats partial (runs in flight, workers, failures, Store size);
- the console's static assets (CSS, script, vendored htmx) in bytes as served.

Requests go in process through the ASGI app (httpx.ASGITransport), so the figures are the
server's own time, without a network or a browser. Checkpoints come from a real graph run
(one counter node looping N steps through the SQL saver); the 100,000 thread rows are
inserted in bulk.

    python bench/console_bench.py                   # SQLite and PostgreSQL
    python bench/console_bench.py --dialect sqlite  # one of them
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, TypedDict

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langgraph.graph import END, START, StateGraph  # noqa: E402


class CounterState(TypedDict, total=False):
    n: int
    limit: int
    note: str


def _count(state: CounterState) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1, "note": "x" * 200}


def _more(state: CounterState) -> str:
    return "count" if state.get("n", 0) < state.get("limit", 0) else END


_builder = StateGraph(CounterState)
_builder.add_node("count", _count)
_builder.add_edge(START, "count")
_builder.add_conditional_edges("count", _more)
counter = _builder.compile(name="counter")

BENCH_FILE = Path(__file__).resolve()
TARGET_MS = 150.0
ASSET_LIMIT = 200 * 1024
THREADS = 100_000


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _time(client: httpx.AsyncClient, url: str, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(3):  # warm up
        assert (await client.get(url)).status_code == 200
    for _ in range(rounds):
        started = time.perf_counter()
        r = await client.get(url)
        samples.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text[:300]
    samples.sort()
    return _p50(samples), samples[int(len(samples) * 0.95) - 1] * 1000


async def _thread_with_checkpoints(state: Any, checkpoints: int) -> str:
    from app.threads.schemas import ThreadCreate

    thread = await state.threads.create_thread(
        tenant_id="default",
        body=ThreadCreate(metadata={"graph_id": "counter", "bench": "console"}),
    )
    graph = _builder.compile(checkpointer=state.saver.for_tenant("default"))
    config: Any = {
        "configurable": {"thread_id": thread.thread_id},
        "recursion_limit": checkpoints + 10,
    }
    # one input checkpoint, then one per step: the first step and `checkpoints - 2` counts
    await graph.ainvoke({"n": 0, "limit": checkpoints - 2}, config)
    return thread.thread_id


async def _bulk_threads(engine: Any, count: int) -> None:
    from sqlalchemy import insert

    from app.db.tables import threads
    from app.db.types import utcnow

    now = utcnow()
    batch = 5000
    for start in range(0, count, batch):
        rows = []
        for i in range(start, min(start + batch, count)):
            at = now - timedelta(seconds=i)
            rows.append(
                {
                    "thread_id": str(uuid.uuid4()),
                    "tenant_id": "default",
                    "status": ("idle", "busy", "interrupted", "error")[i % 4],
                    "metadata": {"graph_id": "counter", "user": f"u{i % 500}"},
                    "config": {},
                    "values": {"n": i},
                    "interrupts": {},
                    "created_at": at,
                    "updated_at": at,
                    "state_updated_at": at,
                }
            )
        async with engine.begin() as conn:
            await conn.execute(insert(threads), rows)


async def bench(dialect: str, rounds: int, sizes: list[int]) -> dict[str, Any]:
    from app.config import Settings
    from app.main import create_app

    tmp = Path(tempfile.mkdtemp(prefix="console_bench_"))
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"counter": f"{BENCH_FILE}:counter"}}))
    pg_name = None
    if dialect == "postgres":
        from benchkit import pg_database

        pg_name = f"gk_console_bench_{uuid.uuid4().hex[:8]}"
        await pg_database("create", pg_name)
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_name}"
        from app.db import migrate
        from app.db.engine import create_engine

        engine = create_engine(url, null_pool=True)
        await migrate.upgrade(engine)
        await engine.dispose()
    else:
        url = f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
    out: dict[str, Any] = {"dialect": dialect}
    try:
        app = create_app(Settings(database_url=url, config_file=config, workers=0))
        async with app.router.lifespan_context(app):
            state = app.state.graphkeep
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
                for size in sizes:
                    started = time.perf_counter()
                    thread_id = await _thread_with_checkpoints(state, size)
                    made = time.perf_counter() - started
                    page = await _time(client, f"/console/threads/{thread_id}", rounds)
                    tree = await _time(client, f"/console/threads/{thread_id}/tree", rounds)
                    out[f"thread_{size}"] = {"page": page, "tree": tree, "setup_s": made}
                started = time.perf_counter()
                await _bulk_threads(state.engine, THREADS)
                made = time.perf_counter() - started
                threads_list = await _time(client, "/console/partials/threads", rounds)
                stats = await _time(client, "/console/partials/stats", rounds)
                shell = await _time(client, "/console", rounds)
                out["overview_100k"] = {
                    "threads": threads_list,
                    "stats": stats,
                    "shell": shell,
                    "setup_s": made,
                }
                html = (await client.get("/console")).text
                weight = 0
                for ref in ("console.css", "console.js", "htmx-2.0.11.min.js"):
                    start = html.index(ref)
                    src = html[html.rindex('"', 0, start) + 1 : html.index('"', start)]
                    weight += len((await client.get(src)).content)
                out["assets_bytes"] = weight
    finally:
        if pg_name is not None:
            from benchkit import pg_database

            await pg_database("drop", pg_name)
    return out


def _report(result: dict[str, Any], sizes: list[int]) -> bool:
    ok = True
    print(f"\n== {result['dialect']}")
    for size in sizes:
        row = result[f"thread_{size}"]
        for part in ("page", "tree"):
            p50, p95 = row[part]
            ok &= p50 < TARGET_MS
            label = f"thread page, {size:>5} checkpoints, {part:<5}"
            print(f"{label} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    if len(sizes) > 1:
        first, last = result[f"thread_{sizes[0]}"], result[f"thread_{sizes[-1]}"]
        for part in ("page", "tree"):
            ratio = last[part][0] / first[part][0]
            print(f"flatness {part}: p50 at {sizes[-1]} / at {sizes[0]} = {ratio:.2f}")
    for part in ("threads", "stats", "shell"):
        p50, p95 = result["overview_100k"][part]
        ok &= p50 < TARGET_MS
        print(f"overview, 100,000 threads, {part:<7} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    weight = result["assets_bytes"]
    ok &= weight < ASSET_LIMIT
    print(f"static assets: {weight / 1024:.1f} KB (limit {ASSET_LIMIT // 1024} KB)")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialect", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--sizes", default="1000,5000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    dialects = ("sqlite", "postgres") if args.dialect == "both" else (args.dialect,)
    ok = True
    for dialect in dialects:
        ok &= _report(asyncio.run(bench(dialect, args.rounds, sizes)), sizes)
    print("\nall targets met" if ok else "\nsome target missed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

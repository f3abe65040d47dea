"""The library's own ceiling for server_bench's `thread_wait`: the same echo graph, a fresh
thread per run, driven in-process by LangGraph with no server, no HTTP and no run records.

`thread_wait` asks a server for runs/s at 32 clients. What LangGraph itself can do on this
machine bounds what any server built on it can do, so this runs the echo graph
(benchkit.ECHO_GRAPH) with `--clients` concurrent callers, each calling
`graph.ainvoke({"text": ...}, {"configurable": {"thread_id": <new>}})` in a loop, on:

- memory      langgraph's `InMemorySaver` (nothing durable: LangGraph's own CPU per run)
- official    langgraph's `AsyncPostgresSaver` on a psycopg pool of `--pool` connections
- graphkeep   graphkeep's `SQLSaver` on its own engine (same pool size)

Each saver gets its own fresh PostgreSQL database. Rounds alternate between the savers, so load
from elsewhere hits all alike; the report gives median runs/s and the process's CPU per run
(`time.process_time`; PostgreSQL's backends are other processes and not counted).

    python bench/library_ceiling.py                       # 32 clients, 3 rounds x 1,000 runs
    python bench/library_ceiling.py --clients 8 --runs 600 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from benchkit import ECHO_GRAPH, pg_database

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SAVERS = ("memory", "official", "graphkeep")


def echo_builder() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(ECHO_GRAPH, "echo_graph", "exec"), namespace)
    return namespace["builder"]


@asynccontextmanager
async def saver_for(kind: str, pool: int) -> AsyncIterator[Any]:
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    name = f"gk_ceiling_{kind}_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    try:
        if kind == "official":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            async with AsyncConnectionPool(
                dsn, min_size=pool, max_size=pool, kwargs=kwargs, open=False
            ) as conns:
                saver = AsyncPostgresSaver(conns)  # type: ignore[arg-type]
                await saver.setup()
                yield saver
        else:
            from app.checkpoint import SQLSaver

            url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
            async with SQLSaver.from_url(url, pool_size=pool, max_overflow=0) as saver:
                await saver.setup()
                yield saver
    finally:
        await pg_database("drop", name)


async def one_round(graph: Any, clients: int, runs: int) -> dict[str, float]:
    left = runs

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            out = await graph.ainvoke({"text": "hello"}, config)
            assert out == {"text": "hello"}, out

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"runs_per_s": runs / wall, "cpu_ms_per_run": cpu * 1000 / runs}


async def main(args: argparse.Namespace) -> None:
    builder = echo_builder()
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in args.savers}
    async with AsyncExitStack() as stack:
        graphs: dict[str, Any] = {}
        for kind in args.savers:
            saver = await stack.enter_async_context(saver_for(kind, args.pool))
            graphs[kind] = builder.compile(checkpointer=saver)
            await one_round(graphs[kind], args.clients, min(args.runs, 100))  # warm up
        for at in range(args.rounds):
            order = args.savers if at % 2 == 0 else list(reversed(args.savers))
            for kind in order:
                figures = await one_round(graphs[kind], args.clients, args.runs)
                results[kind].append(figures)
                print(
                    f"round {at + 1} {kind:9s} {figures['runs_per_s']:7.1f} runs/s "
                    f"{figures['cpu_ms_per_run']:5.2f} ms CPU/run",
                    file=sys.stderr,
                    flush=True,
                )

    def median(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in results[kind])

    print(f"\n{args.clients} clients, {args.rounds} rounds x {args.runs} runs, pool {args.pool}")
    print(f"{'saver':10s} {'runs/s':>8s} {'CPU ms/run':>11s}")
    for kind in args.savers:
        print(
            f"{kind:10s} {median(kind, 'runs_per_s'):8.1f} {median(kind, 'cpu_ms_per_run'):11.2f}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--runs", type=int, default=1000, help="runs per saver per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", type=int, default=10, help="connections per PostgreSQL saver")
    parser.add_argument("--savers", nargs="+", choices=SAVERS, default=list(SAVERS))
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))

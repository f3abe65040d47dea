"""Thread stream latency: graphkeep (PostgreSQL) next to the official `langgraph dev` server.

A client joins `GET /threads/{t}/stream` (the SDK's `threads.join_stream`), then creates a run
on that thread; measured from the create call: the first thread-stream event (the run's
`metadata`) and its end (`metadata {"status": "run_done"}`). Rounds alternate between the
servers (interleaved, so machine load hits both alike); medians in ms.

    python -m bench.thread_stream_bench --rounds 30 [--skip-official]
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
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from bench.benchkit import (
    ECHO_GRAPH,
    ROOT,
    clean_env,
    free_port,
    langgraph_dev_server,
    pg_database,
    process,
    wait_ready,
)


@asynccontextmanager
async def graphkeep(tmp: Path) -> AsyncIterator[str]:
    name = f"gk_tsbench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}",
        GRAPHKEEP_LOG_LEVEL="WARNING",
    )
    try:
        await asyncio.to_thread(
            __import__("subprocess").run,
            [sys.executable, "-m", "app.cli", "migrate"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        port = free_port()
        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
        cmd += ["--config", str(tmp / "langgraph.json")]
        with process(cmd, env, tmp / "graphkeep.log", ROOT) as proc:
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url, proc, tmp / "graphkeep.log")
            yield url
    finally:
        await pg_database("drop", name)


async def one_round(url: str) -> dict[str, float]:
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    stream = await client.threads.join_stream(tid)
    first = asyncio.get_running_loop().create_future()
    done = asyncio.get_running_loop().create_future()

    async def read() -> None:
        async for part in stream:
            now = time.perf_counter()
            if not first.done():
                first.set_result(now)
            if (
                part.event == "metadata"
                and isinstance(part.data, dict)
                and part.data.get("status") == "run_done"
            ):
                done.set_result(now)
                return

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)  # joined
    started = time.perf_counter()
    await client.runs.create(tid, "echo", input={"text": "x"})
    try:
        t_first = await asyncio.wait_for(first, 30)
        t_done = await asyncio.wait_for(done, 30)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await client.aclose()
    return {"first_ms": (t_first - started) * 1000, "done_ms": (t_done - started) * 1000}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument("--out", default="bench/results/thread_stream.json")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gk_tsbench_"))
    (tmp / "echo_graph.py").write_text(ECHO_GRAPH)
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"echo": "./echo_graph.py:graph"}})
    )
    async with AsyncExitStack() as stack:
        targets = {"graphkeep_pg": await stack.enter_async_context(graphkeep(tmp))}
        if not args.skip_official:
            targets["langgraph_dev"] = await stack.enter_async_context(langgraph_dev_server(tmp))
        for url in targets.values():  # warm-up
            await one_round(url)
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, url in targets.items():
                rounds[name].append(await one_round(url))
    summary: dict[str, Any] = {
        name: {
            key: round(statistics.median(r[key] for r in values), 1)
            for key in ("first_ms", "done_ms")
        }
        for name, values in rounds.items()
    }
    if "langgraph_dev" in summary:
        gk, off = summary["graphkeep_pg"], summary["langgraph_dev"]
        summary["ratio_official_over_graphkeep"] = {
            key: round(off[key] / gk[key], 1) for key in ("first_ms", "done_ms")
        }
    save(Path(args.out), {"median": summary, "rounds": rounds})
    print(json.dumps(summary, indent=2))


def save(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

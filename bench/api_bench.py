"""HTTP API benchmark: graphkeep on PostgreSQL vs the official `langgraph dev` server.

Both servers serve the same graph (a copy of app/examples/approval.py) and get the same
requests over loopback HTTP:

- thread create            POST /threads
- get_state                GET  /threads/{t}/state on a thread with 1,000 checkpoints
- get_state (fresh)        the same on a thread with 1 checkpoint (latency must stay flat)
- history(limit=10)        POST /threads/{t}/history on the 1,000-checkpoint thread
- store search             POST /store/items/search over 200 items

For each: the median and p95 of sequential requests, then throughput with a few concurrent
clients. The official server comes from `langgraph-cli[inmem]`, installed by this script into
its own virtual environment under .bench-venvs/ (nothing is installed globally).

    python bench/api_bench.py                 # full run (needs PostgreSQL on 127.0.0.1:5432)
    python bench/api_bench.py --quick         # fewer requests
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from benchkit import (
    PG_ADMIN_DSN,
    clean_env,
    free_port,
    install_langgraph_dev,
    pg_database,
    process,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
GRAPH_SOURCE = ROOT / "app" / "examples" / "approval.py"
HISTORY_LENGTH = 1000


# --------------------------------------------------------------------------- measurement


async def latency(call: Callable[[], Awaitable[None]], n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": samples[int(len(samples) * 0.95) - 1],
    }


async def throughput(call: Callable[[], Awaitable[None]], total: int, workers: int) -> float:
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return total / (time.perf_counter() - start)


async def bench_server(url: str, *, requests: int, concurrency: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def ok(resp: Awaitable[httpx.Response]) -> dict[str, Any] | list[Any] | Any:
            r = await resp
            r.raise_for_status()
            return r.json() if r.content else None

        # setup: one long thread (1,000 checkpoints), one fresh thread, 200 store items
        long_thread = (
            await ok(client.post("/threads", json={"metadata": {"graph_id": "approval"}}))
        )["thread_id"]
        t0 = time.perf_counter()
        for i in range(HISTORY_LENGTH):
            await ok(
                client.post(
                    f"/threads/{long_thread}/state",
                    json={"values": {"request": f"r{i}"}, "as_node": "propose"},
                )
            )
        setup_s = time.perf_counter() - t0
        fresh = (await ok(client.post("/threads", json={"metadata": {"graph_id": "approval"}})))[
            "thread_id"
        ]
        await ok(
            client.post(
                f"/threads/{fresh}/state", json={"values": {"request": "x"}, "as_node": "propose"}
            )
        )
        ns = ["bench", uuid.uuid4().hex]
        for i in range(200):
            await ok(
                client.put(
                    "/store/items",
                    json={"namespace": [*ns, f"n{i % 4}"], "key": f"k{i}", "value": {"i": i}},
                )
            )
        history = await ok(client.post(f"/threads/{long_thread}/history", json={"limit": 10}))
        assert len(history) == 10, history

        ops: dict[str, Callable[[], Awaitable[Any]]] = {
            "thread_create": lambda: ok(client.post("/threads", json={})),
            "get_state_1000": lambda: ok(client.get(f"/threads/{long_thread}/state")),
            "get_state_1": lambda: ok(client.get(f"/threads/{fresh}/state")),
            "history_limit10": lambda: ok(
                client.post(f"/threads/{long_thread}/history", json={"limit": 10})
            ),
            "store_search": lambda: ok(
                client.post(
                    "/store/items/search",
                    json={"namespace_prefix": ns, "limit": 10, "filter": {"i": {"$gte": 100}}},
                )
            ),
        }
        results: dict[str, Any] = {"setup_1000_update_state_s": round(setup_s, 2)}
        for name, call in ops.items():
            for _ in range(5):  # warm-up
                await call()
            lat = await latency(call, requests)
            rps = await throughput(call, requests * 2, concurrency)
            results[name] = {**{k: round(v, 2) for k, v in lat.items()}, "rps": round(rps, 1)}
        return results


# --------------------------------------------------------------------------- servers


async def run_graphkeep(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    name = f"gk_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    db_url = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=db_url, GRAPHKEEP_WORKERS="1", GRAPHKEEP_LOG_LEVEL="WARNING"
    )
    try:
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "app.cli", "migrate"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--port",
            str(port),
            "--config",
            str(tmp / "langgraph.json"),
        ]
        with process(cmd, env, tmp / "graphkeep.log", ROOT) as proc:
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url, proc, tmp / "graphkeep.log", "/ok")
            return await bench_server(url, requests=args.requests, concurrency=args.concurrency)
    finally:
        await pg_database("drop", name)


async def run_official(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    exe = await asyncio.to_thread(install_langgraph_dev)
    port = free_port()
    env = clean_env(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false")
    cmd = [
        str(exe),
        "dev",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-browser",
        "--no-reload",
        "--config",
        str(tmp / "langgraph.json"),
    ]
    with process(cmd, env, tmp / "langgraph-dev.log", tmp) as proc:
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url, proc, tmp / "langgraph-dev.log", "/ok")
        return await bench_server(url, requests=args.requests, concurrency=args.concurrency)


def report(results: dict[str, dict[str, Any]]) -> str:
    gk, off = results.get("graphkeep_pg", {}), results.get("langgraph_dev", {})
    lines = [
        f"{'operation':<18}{'graphkeep p50':>14}{'official p50':>14}{'ratio':>8}"
        f"{'graphkeep rps':>15}{'official rps':>14}"
    ]
    for op in ("thread_create", "get_state_1000", "get_state_1", "history_limit10", "store_search"):
        g, o = gk.get(op), off.get(op)
        if not g:
            continue
        ratio = f"{g['median_ms'] / o['median_ms']:.2f}" if o else "-"
        lines.append(
            f"{op:<18}{g['median_ms']:>12.2f}ms"
            f"{(str(o['median_ms']) + 'ms') if o else '-':>14}{ratio:>8}"
            f"{g['rps']:>15}{o['rps'] if o else '-':>14}"
        )
    lines.append("ratio = graphkeep median / official median (below 1 means graphkeep is faster)")
    return "\n".join(lines)


def save(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="sequential requests per op")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="50 requests per op")
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "api_bench.json"))
    args = parser.parse_args()
    if args.quick:
        args.requests = 50
    tmp = Path(tempfile.mkdtemp(prefix="gk_api_bench_"))
    shutil.copy(GRAPH_SOURCE, tmp / "graph.py")
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"approval": "./graph.py:graph"}})
    )
    results: dict[str, Any] = {}
    results["graphkeep_pg"] = await run_graphkeep(tmp, args)
    if not args.skip_official:
        try:
            results["langgraph_dev"] = await run_official(tmp, args)
        except RuntimeError as exc:
            results["langgraph_dev_error"] = str(exc)[-2000:]
            print(f"official server unavailable: {exc}", file=sys.stderr)
    save(Path(args.output), results)
    print(json.dumps(results, indent=2))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

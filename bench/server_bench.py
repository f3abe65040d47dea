"""Run-engine benchmark: graphkeep on PostgreSQL vs the official `langgraph dev` server.

Both servers serve the same echo graph (one node that returns its input) over loopback HTTP:

- runs/wait            POST /runs/wait (stateless): p50 / p95 latency and throughput at
                       concurrency 1, 8 and 32
- thread runs/wait     POST /threads/{t}/runs/wait, each client on its own thread (no temporary
                       thread to create and delete per run), at concurrency 1, 8 and 32
- stream               POST /threads/{t}/runs/stream: time to the first event and to the last
- one thread           200 sequential runs/wait on one thread: median latency of the last 20
                       over the first 20 (must stay flat as the thread's history grows)

The official server comes from `langgraph-cli[inmem]`, installed by this script into its own
virtual environment under .bench-venvs/ (nothing is installed globally).

    python bench/server_bench.py                 # full run (PostgreSQL on 127.0.0.1:5432)
    python bench/server_bench.py --quick         # fewer requests
    python bench/server_bench.py --skip-official
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
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
ECHO_GRAPH = """
from typing import Any, TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict, total=False):
    text: str


def echo(state: State) -> dict[str, Any]:
    return {"text": state.get("text", "")}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
graph = builder.compile()
"""
CONCURRENCY: tuple[int, ...] = (1, 8, 32)


# --------------------------------------------------------------------------- measurement


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
    }


async def timed_calls(
    call: Callable[[], Awaitable[None]] | None,
    total: int,
    concurrency: int,
    *,
    per_client: Callable[[], Callable[[], Awaitable[None]]] | None = None,
) -> dict[str, float]:
    """`total` calls by `concurrency` concurrent clients: latency percentiles and runs/s.

    `per_client` makes each client its own call (e.g. a run on the client's own thread)."""
    remaining = total
    samples: list[float] = []

    async def client() -> None:
        nonlocal remaining
        own = per_client() if per_client is not None else call
        assert own is not None
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await own()
            samples.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {**summary(samples), "runs_per_s": round(total / elapsed, 1)}


async def bench_server(url: str, *, requests: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=80, max_keepalive_connections=80)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def wait_stateless() -> None:
            r = await http.post("/runs/wait", json={"assistant_id": "echo", "input": {"text": "x"}})
            r.raise_for_status()
            assert r.json() == {"text": "x"}, r.text

        threads = [
            (await http.post("/threads", json={})).json()["thread_id"]
            for _ in range(sum(CONCURRENCY))
        ]

        def wait_on_own_thread() -> Callable[[], Awaitable[None]]:
            tid = threads.pop()

            async def call() -> None:
                r = await http.post(
                    f"/threads/{tid}/runs/wait",
                    json={"assistant_id": "echo", "input": {"text": "x"}},
                )
                r.raise_for_status()
                assert r.json() == {"text": "x"}, r.text

            return call

        for _ in range(10):  # warm-up (graph import, connections)
            await wait_stateless()
        results: dict[str, Any] = {}
        for concurrency in CONCURRENCY:
            total = max(requests, concurrency * 8) if concurrency > 1 else requests
            results[f"wait_c{concurrency}"] = await timed_calls(wait_stateless, total, concurrency)
        for concurrency in CONCURRENCY:
            total = max(requests, concurrency * 8) if concurrency > 1 else requests
            results[f"thread_wait_c{concurrency}"] = await timed_calls(
                None, total, concurrency, per_client=wait_on_own_thread
            )

        first_ms: list[float] = []
        last_ms: list[float] = []
        for _ in range(max(20, requests // 4)):
            tid = (await http.post("/threads", json={})).json()["thread_id"]
            body = {"assistant_id": "echo", "input": {"text": "s"}, "stream_mode": ["values"]}
            start = time.perf_counter()
            first: float | None = None
            async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as s:
                async for line in s.aiter_lines():
                    if line.startswith("event:") and first is None:
                        first = (time.perf_counter() - start) * 1000
            last_ms.append((time.perf_counter() - start) * 1000)
            assert first is not None
            first_ms.append(first)
        results["stream_first_event"] = summary(first_ms)
        results["stream_last_event"] = summary(last_ms)

        tid = (await http.post("/threads", json={})).json()["thread_id"]
        one_thread: list[float] = []
        for i in range(200):
            start = time.perf_counter()
            r = await http.post(
                f"/threads/{tid}/runs/wait",
                json={"assistant_id": "echo", "input": {"text": str(i)}},
            )
            r.raise_for_status()
            one_thread.append((time.perf_counter() - start) * 1000)
        first20 = statistics.median(one_thread[:20])
        last20 = statistics.median(one_thread[-20:])
        results["one_thread_200"] = {
            "first20_p50_ms": round(first20, 2),
            "last20_p50_ms": round(last20, 2),
            "ratio": round(last20 / first20, 2),
        }
        return results


# --------------------------------------------------------------------------- servers


async def run_graphkeep(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    name = f"gk_srv_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    db_url = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=db_url,
        GRAPHKEEP_WORKERS=str(args.workers),
        GRAPHKEEP_DB_POOL_SIZE=str(max(10, args.workers)),
        GRAPHKEEP_DB_MAX_OVERFLOW=str(max(10, args.workers)),
        GRAPHKEEP_LOG_LEVEL="WARNING",
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
        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
        cmd += ["--config", str(tmp / "langgraph.json")]
        with ExitStack() as stack:
            # Optional `graphkeep worker` processes beside the API (API and workers scale
            # apart): runs the API process has no free slot for go to them.
            for i in range(args.extra_workers):
                worker_cmd = [sys.executable, "-m", "app.cli", "worker"]
                worker_cmd += ["--config", str(tmp / "langgraph.json")]
                worker_cmd += ["--concurrency", str(args.worker_concurrency)]
                worker_env = {**env, "GRAPHKEEP_WORKERS": str(args.worker_concurrency)}
                stack.enter_context(process(worker_cmd, worker_env, tmp / f"worker{i}.log", ROOT))
            proc = stack.enter_context(process(cmd, env, tmp / "graphkeep.log", ROOT))
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url, proc, tmp / "graphkeep.log")
            return await bench_server(url, requests=args.requests)
    finally:
        await pg_database("drop", name)


async def run_official(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    exe = await asyncio.to_thread(install_langgraph_dev)
    port = free_port()
    env = clean_env(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false")
    cmd = [str(exe), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser"]
    cmd += ["--no-reload", "--config", str(tmp / "langgraph.json")]
    with process(cmd, env, tmp / "langgraph-dev.log", tmp) as proc:
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url, proc, tmp / "langgraph-dev.log")
        return await bench_server(url, requests=args.requests)


def save(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


def report(results: dict[str, dict[str, Any]]) -> str:
    gk, off = results.get("graphkeep_pg", {}), results.get("langgraph_dev", {})
    lines = [f"{'measure':<34}{'graphkeep (PG)':>26}  {'langgraph dev':>26}"]

    def cell(d: dict[str, Any] | None, keys: tuple[str, ...]) -> str:
        if not d:
            return "-"
        return " / ".join(f"{d[k]}" for k in keys)

    rows: list[tuple[str, str, tuple[str, ...]]] = [
        (f"wait c={c} p50 ms / p95 ms / runs/s", f"wait_c{c}", ("p50_ms", "p95_ms", "runs_per_s"))
        for c in CONCURRENCY
    ]
    rows += [
        (
            f"thread wait c={c} p50 / p95 / runs/s",
            f"thread_wait_c{c}",
            ("p50_ms", "p95_ms", "runs_per_s"),
        )
        for c in CONCURRENCY
    ]
    rows += [
        ("stream first event p50 / p95 ms", "stream_first_event", ("p50_ms", "p95_ms")),
        ("stream last event p50 / p95 ms", "stream_last_event", ("p50_ms", "p95_ms")),
        (
            "one thread first20 / last20 / ratio",
            "one_thread_200",
            ("first20_p50_ms", "last20_p50_ms", "ratio"),
        ),
    ]
    for label, key, keys in rows:
        lines.append(f"{label:<34}{cell(gk.get(key), keys):>26}  {cell(off.get(key), keys):>26}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="runs per concurrency level")
    parser.add_argument("--workers", type=int, default=32, help="graphkeep in-process workers")
    parser.add_argument(
        "--extra-workers", type=int, default=0, help="`graphkeep worker` processes to add"
    )
    parser.add_argument("--worker-concurrency", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="60 runs per level")
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "server_bench.json"))
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels, comma-separated")
    args = parser.parse_args()
    global CONCURRENCY
    CONCURRENCY = tuple(int(x) for x in args.levels.split(","))
    if args.quick:
        args.requests = 60
    tmp = Path(tempfile.mkdtemp(prefix="gk_server_bench_"))
    (tmp / "echo_graph.py").write_text(ECHO_GRAPH)
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"echo": "./echo_graph.py:graph"}})
    )
    results: dict[str, Any] = {"graphkeep_pg": await run_graphkeep(tmp, args)}
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

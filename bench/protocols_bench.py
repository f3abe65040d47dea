"""MCP and A2A overhead: `tools/call` and `message/send` vs graphkeep's own `runs/wait`.

graphkeep on a throwaway PostgreSQL database serves the echo graph (one node that returns its
input); over loopback HTTP, each measure runs the graph once per request:

- runs/wait      POST /runs/wait (stateless), the baseline
- mcp            POST /mcp `tools/call` of the `echo` tool (stateless run, JSON response)
- a2a            POST /a2a/echo `message/send` with a data part (a run on a new thread: a
                 context is a thread, so the next message could continue it; the official
                 server too creates a thread for a message without contextId)
- thread_wait    POST /threads/{new id}/runs/wait with if_not_exists=create: what a2a does
                 through the run service, for reference (a persisted thread per run)

Each gives the p50 latency at concurrency 1 and the throughput at concurrency 32; the target
is each protocol within 1.5x of runs/wait. Ratios are given to both runs/wait measures (a2a's
fair comparison is thread_wait, the same run-service work) and, with `--official`, to the
official server's same measure. The measures alternate round by round (`--rounds`),
so load from elsewhere hits all alike; the report gives medians over rounds and ratios.
`--official` adds the official `langgraph dev` server (langgraph-cli[inmem], installed into
.bench-venvs/ by bench/benchkit.py) with its /mcp and /a2a when it serves them offline.

    python bench/protocols_bench.py --rounds 3
    python bench/protocols_bench.py --quick
    mkdir /tmp/gk-base && git archive main | tar -x -C /tmp/gk-base
    python bench/protocols_bench.py --baseline-root /tmp/gk-base   # before/after, side by side
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
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
from benchkit import (
    ECHO_GRAPH,
    PG_ADMIN_DSN,
    clean_env,
    free_port,
    langgraph_dev_server,
    pg_database,
    process,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ("runs_wait", "mcp", "a2a", "thread_wait")
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Target:
    """One server: the three calls, each checked for the echo's output."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        limits = httpx.Limits(max_connections=80, max_keepalive_connections=80)
        self.http = httpx.AsyncClient(base_url=url, timeout=120, limits=limits)

    async def runs_wait(self) -> None:
        r = await self.http.post(
            "/runs/wait", json={"assistant_id": "echo", "input": {"text": "x"}}
        )
        r.raise_for_status()
        assert r.json() == {"text": "x"}, r.text

    async def thread_wait(self) -> None:
        body = {"assistant_id": "echo", "input": {"text": "x"}, "if_not_exists": "create"}
        r = await self.http.post(f"/threads/{uuid.uuid4()}/runs/wait", json=body)
        r.raise_for_status()
        assert r.json() == {"text": "x"}, r.text

    async def mcp(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}},
        }
        r = await self.http.post("/mcp", json=body, headers=MCP_HEADERS)
        r.raise_for_status()
        assert "result" in r.json(), r.text
        result = r.json()["result"]
        assert not result.get("isError") and "x" in result["content"][0]["text"], r.text

    async def a2a(self) -> None:
        message = {
            "role": "user",
            "messageId": str(uuid.uuid4()),
            "parts": [{"kind": "data", "data": {"text": "x"}}],
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        r = await self.http.post(f"/a2a/{self.echo_id}", json=body)
        r.raise_for_status()
        assert "result" in r.json(), r.text
        result = r.json()["result"]
        assert result["status"]["state"] == "completed", r.text

    async def prepare(self, warm_up: int) -> None:
        found = await self.http.post("/assistants/search", json={"graph_id": "echo"})
        found.raise_for_status()
        self.echo_id = found.json()[0]["assistant_id"]
        for call in (self.runs_wait, self.mcp, self.a2a, self.thread_wait):
            for _ in range(warm_up):
                await call()

    def call(self, measure: str) -> Callable[[], Awaitable[None]]:
        call: Callable[[], Awaitable[None]] = getattr(self, measure)
        return call


async def timed(
    call: Callable[[], Awaitable[None]], total: int, concurrency: int
) -> dict[str, float]:
    remaining = total
    samples: list[float] = []

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"p50_ms": statistics.median(samples), "per_s": total / elapsed}


async def graphkeep_server(stack: AsyncExitStack, tmp: Path, root: Path = ROOT) -> str:
    """graphkeep served from the checkout at `root` (`python -m` runs the app found there)."""
    name = f"gk_protocols_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    stack.push_async_callback(pg_database, "drop", name)
    db_url = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=f"{db_url}/{name}",
        GRAPHKEEP_CONFIG_FILE=str(tmp / "langgraph.json"),
        GRAPHKEEP_LOG_LEVEL="WARNING",
        GRAPHKEEP_WORKERS="4",
        # small pools: the PostgreSQL cluster is shared (a loaded run hit "too many clients")
        GRAPHKEEP_DB_POOL_SIZE="4",
        GRAPHKEEP_DB_MAX_OVERFLOW="2",
    )
    python = sys.executable
    migrate = await asyncio.create_subprocess_exec(
        python, "-m", "app.cli", "migrate", env=env, cwd=root
    )
    assert await migrate.wait() == 0, "graphkeep migrate failed"
    port = free_port()
    cmd = [python, "-m", "app.cli", "serve", "--port", str(port)]
    log = tmp / f"graphkeep-{port}.log"
    proc = stack.enter_context(process(cmd, env, log, root))
    url = f"http://127.0.0.1:{port}"
    await wait_ready(url, proc, log)
    return url


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "echo.py").write_text(ECHO_GRAPH)
        (tmp / "langgraph.json").write_text(
            json.dumps({"dependencies": ["."], "graphs": {"echo": "./echo.py:graph"}})
        )
        async with AsyncExitStack() as stack:
            targets = [Target("graphkeep", await graphkeep_server(stack, tmp))]
            if args.baseline_root:
                # the same measures on an older checkout, round by round with this one
                url = await graphkeep_server(stack, tmp, args.baseline_root.resolve())
                targets.append(Target("graphkeep@baseline", url))
            if args.official:
                url = await stack.enter_async_context(langgraph_dev_server(tmp, progress))
                targets.append(Target("langgraph-dev", url))
            for target in targets:
                stack.push_async_callback(target.http.aclose)
                await target.prepare(3 if target.name == "langgraph-dev" else 10)
                progress(f"{target.name} ready")
            for round_no in range(args.rounds):
                order = MEASURES if round_no % 2 == 0 else tuple(reversed(MEASURES))
                for measure in order:
                    for target in targets:
                        call = target.call(measure)
                        # the official dev server answers in tenths of a second on a shared
                        # machine: fewer requests keep its part to minutes
                        scale = args.official_share if target.name == "langgraph-dev" else 1
                        c1 = await timed(call, max(10, int(args.c1_requests * scale)), 1)
                        c32 = await timed(call, max(32, int(args.c32_requests * scale)), 32)
                        slot = results.setdefault(target.name, {}).setdefault(
                            measure, {"p50_ms_c1": [], "per_s_c32": []}
                        )
                        slot["p50_ms_c1"].append(c1["p50_ms"])
                        slot["per_s_c32"].append(c32["per_s"])
                        progress(
                            f"round {round_no + 1} {target.name} {measure}: "
                            f"p50 {c1['p50_ms']:.2f} ms at c=1, {c32['per_s']:.0f}/s at c=32"
                        )
    return summarise(results)


def summarise(results: dict[str, dict[str, dict[str, list[float]]]]) -> dict[str, Any]:
    """Medians over rounds, and each measure's ratios: to this server's stateless runs/wait
    (the target), to its thread runs/wait (what a2a does through the run service), and to
    the official server's same measure when it ran (`*_to_official`: above 1 is slower)."""
    medians = {
        name: {
            measure: (statistics.median(m["p50_ms_c1"]), statistics.median(m["per_s_c32"]))
            for measure, m in measures.items()
        }
        for name, measures in results.items()
    }
    official = medians.get("langgraph-dev", {})
    report: dict[str, Any] = {}
    for name, measures in medians.items():
        entry: dict[str, Any] = {}
        for measure, (p50, rate) in measures.items():
            row = {"p50_ms_c1": round(p50, 2), "per_s_c32": round(rate, 1)}
            for base_name in ("runs_wait", "thread_wait"):
                base_p50, base_rate = measures[base_name]
                row[f"p50_ratio_to_{base_name}"] = round(p50 / base_p50, 2)
                row[f"throughput_ratio_to_{base_name}"] = round(base_rate / rate, 2)
            if name != "langgraph-dev" and measure in official:
                row["p50_ratio_to_official"] = round(p50 / official[measure][0], 3)
                row["throughput_ratio_to_official"] = round(official[measure][1] / rate, 2)
            entry[measure] = row
        report[name] = entry
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--c1-requests", type=int, default=200)
    parser.add_argument("--c32-requests", type=int, default=640)
    parser.add_argument("--quick", action="store_true", help="1 round, fewer requests")
    parser.add_argument("--official", action="store_true", help="add `langgraph dev`")
    parser.add_argument(
        "--official-share", type=float, default=0.15, help="share of requests for `langgraph dev`"
    )
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="also serve graphkeep from this checkout (e.g. `git archive main`): before/after",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.c1_requests, args.c32_requests = 1, 60, 192
    report = asyncio.run(main(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")

"""HTTP API benchmark: graphkeep on PostgreSQL vs the official `langgraph dev` server.

Both servers serve the same graph (a copy of app/examples/approval.py), run AT ONCE, and get
the same requests over loopback HTTP:

- thread create            POST /threads
- get_state                GET  /threads/{t}/state on a thread with 1,000 checkpoints
- get_state (fresh)        the same on a thread with 1 checkpoint (latency must stay flat)
- history(limit=10)        POST /threads/{t}/history on the 1,000-checkpoint thread
- store search             POST /store/items/search over 200 items

Requests alternate between the servers (the order is shuffled every round), so load from
elsewhere on the machine hits both alike: per operation, `--requests` rounds of one
sequential request to each give the median and p95 latency; then throughput with
`--concurrency` clients, in `--blocks` alternating blocks per server. Both servers get
identically configured httpx clients and the same response handling (status check, JSON
decode). The official server comes from `langgraph-cli[inmem]`, installed by this script
into its own virtual environment under .bench-venvs/ (nothing is installed globally).

    python bench/api_bench.py                 # full run (needs PostgreSQL on 127.0.0.1:5432)
    python bench/api_bench.py --quick         # fewer requests
    python bench/api_bench.py --skip-official # graphkeep alone
    python bench/api_bench.py --skip-official --baseline-tree /tmp/old  # before/after:
        # a second graphkeep from another source tree (e.g. `git archive <commit>`
        # unpacked there), served from this .venv, measured alternately with this one
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from benchkit import (
    PG_ADMIN_DSN,
    clean_env,
    free_port,
    langgraph_dev_server,
    pg_database,
    process,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
GRAPH_SOURCE = ROOT / "app" / "examples" / "approval.py"
HISTORY_LENGTH = 1000
STORE_ITEMS = 200
OPERATIONS = ("thread_create", "get_state_1000", "get_state_1", "history_limit10", "store_search")
# other everyday calls, measured on request (--ops ... or --ops-all)
MORE_OPERATIONS = (
    "thread_get",
    "thread_patch",
    "thread_search",
    "thread_count",
    "store_get",
    "store_put",
    "assistant_search",
    "assistant_get",
)
GRAPHKEEP, OFFICIAL, BASELINE = "graphkeep_pg", "langgraph_dev", "graphkeep_baseline"

Call = Callable[[], Awaitable[Any]]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- one server


class Target:
    """One server under test: its HTTP client, its fixtures and the measured calls."""

    def __init__(self, name: str, url: str, concurrency: int) -> None:
        self.name = name
        # identical for both servers: same pool, same timeout, same response handling
        limits = httpx.Limits(max_connections=concurrency * 2)
        self.http = httpx.AsyncClient(base_url=url, timeout=60, limits=limits)
        self.ops: dict[str, Call] = {}
        self.setup_s = 0.0

    async def aclose(self) -> None:
        await self.http.aclose()

    async def ok(self, resp: Awaitable[httpx.Response]) -> Any:
        r = await resp
        r.raise_for_status()
        return r.json() if r.content else None

    async def setup(self) -> None:
        """One thread with 1,000 checkpoints, one with 1, and 200 store items."""
        ok, http = self.ok, self.http
        body = {"metadata": {"graph_id": "approval"}}
        long_thread = (await ok(http.post("/threads", json=body)))["thread_id"]
        t0 = time.perf_counter()
        for i in range(HISTORY_LENGTH):
            update = {"values": {"request": f"r{i}"}, "as_node": "propose"}
            await ok(http.post(f"/threads/{long_thread}/state", json=update))
        self.setup_s = time.perf_counter() - t0
        fresh = (await ok(http.post("/threads", json=body)))["thread_id"]
        update = {"values": {"request": "x"}, "as_node": "propose"}
        await ok(http.post(f"/threads/{fresh}/state", json=update))
        ns = ["bench", uuid.uuid4().hex]
        for i in range(STORE_ITEMS):
            item = {"namespace": [*ns, f"n{i % 4}"], "key": f"k{i}", "value": {"i": i}}
            await ok(http.put("/store/items", json=item))
        history = await ok(http.post(f"/threads/{long_thread}/history", json={"limit": 10}))
        assert len(history) == 10, history
        state = await ok(http.get(f"/threads/{long_thread}/state"))
        assert state["values"]["request"] == f"r{HISTORY_LENGTH - 1}", state["values"]
        search = {"namespace_prefix": ns, "limit": 10, "filter": {"i": {"$gte": 100}}}
        found = await ok(http.post("/store/items/search", json=search))
        assert len(found["items"]) == 10, found
        assistants = await ok(http.post("/assistants/search", json={"graph_id": "approval"}))
        assistant_id = assistants[0]["assistant_id"]
        self.ops = {
            "thread_create": lambda: ok(http.post("/threads", json={})),
            "get_state_1000": lambda: ok(http.get(f"/threads/{long_thread}/state")),
            "get_state_1": lambda: ok(http.get(f"/threads/{fresh}/state")),
            "history_limit10": lambda: ok(
                http.post(f"/threads/{long_thread}/history", json={"limit": 10})
            ),
            "store_search": lambda: ok(http.post("/store/items/search", json=search)),
            "thread_get": lambda: ok(http.get(f"/threads/{fresh}")),
            "thread_patch": lambda: ok(
                http.patch(f"/threads/{fresh}", json={"metadata": {"n": 1}})
            ),
            "thread_search": lambda: ok(
                http.post(
                    "/threads/search", json={"metadata": {"graph_id": "approval"}, "limit": 10}
                )
            ),
            "thread_count": lambda: ok(http.post("/threads/count", json={"status": "idle"})),
            "store_get": lambda: ok(
                http.get("/store/items", params={"namespace": ".".join([*ns, "n1"]), "key": "k1"})
            ),
            "store_put": lambda: ok(
                http.put(
                    "/store/items", json={"namespace": [*ns, "n1"], "key": "k1", "value": {"i": 1}}
                )
            ),
            "assistant_search": lambda: ok(http.post("/assistants/search", json={"limit": 10})),
            "assistant_get": lambda: ok(http.get(f"/assistants/{assistant_id}")),
        }


# --------------------------------------------------------------------------- measurement


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3),
    }


async def alternating_latency(
    targets: list[Target], op: str, rounds: int, rng: random.Random
) -> dict[str, list[float]]:
    """`rounds` rounds of one sequential request per target, in a shuffled order."""
    samples: dict[str, list[float]] = {t.name: [] for t in targets}
    for _ in range(rounds):
        order = targets[:]
        rng.shuffle(order)
        for t in order:
            call = t.ops[op]
            start = time.perf_counter()
            await call()
            samples[t.name].append((time.perf_counter() - start) * 1000)
    return samples


async def burst(call: Call, total: int, concurrency: int) -> float:
    """Seconds for `total` calls by `concurrency` concurrent clients."""
    remaining = total

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - start


async def alternating_throughput(
    targets: list[Target], op: str, total: int, concurrency: int, blocks: int, rng: random.Random
) -> dict[str, float]:
    """Requests per second: `total` requests per target, in `blocks` blocks that alternate."""
    spent = {t.name: 0.0 for t in targets}
    per_block = max(concurrency, total // blocks)
    for _ in range(blocks):
        order = targets[:]
        rng.shuffle(order)
        for t in order:
            spent[t.name] += await burst(t.ops[op], per_block, concurrency)
    return {name: per_block * blocks / seconds for name, seconds in spent.items()}


async def bench(targets: list[Target], args: argparse.Namespace) -> dict[str, Any]:
    progress("setup: 1,000 update_state calls and 200 store puts per server (concurrently)")
    await asyncio.gather(*(t.setup() for t in targets))
    results: dict[str, Any] = {
        t.name: {"setup_1000_update_state_s": round(t.setup_s, 2)} for t in targets
    }
    rng = random.Random(args.seed)
    for op in args.ops:
        await alternating_latency(targets, op, args.warmup, rng)
        samples = await alternating_latency(targets, op, args.requests, rng)
        rps = await alternating_throughput(
            targets, op, args.requests * 2, args.concurrency, args.blocks, rng
        )
        for t in targets:
            results[t.name][op] = {**summary(samples[t.name]), "rps": round(rps[t.name], 1)}
        progress(f"{op:<16} " + "  ".join(f"{t.name}={results[t.name][op]}" for t in targets))
    return results


# --------------------------------------------------------------------------- servers


@asynccontextmanager
async def graphkeep_server(tmp: Path, tree: Path = ROOT) -> AsyncIterator[str]:
    """`graphkeep serve` from source `tree` on a throwaway PostgreSQL database; yields its
    URL. `tree`'s `app` package is imported first (PYTHONPATH), this .venv's dependencies."""
    name = f"gk_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", name)
    db_url = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=db_url,
        GRAPHKEEP_WORKERS="1",
        GRAPHKEEP_LOG_LEVEL="WARNING",
        PYTHONPATH=str(tree),
    )
    try:
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "app.cli", "migrate"],
            env=env,
            cwd=tree,
            check=True,
            capture_output=True,
        )
        port = free_port()
        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
        cmd += ["--config", str(tmp / "langgraph.json")]
        log = tmp / f"graphkeep-{name}.log"
        with process(cmd, env, log, tree) as proc:
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url, proc, log, "/ok")
            progress(f"graphkeep ready at {url} (pid {proc.pid}, database {name})")
            yield url
    finally:
        await pg_database("drop", name)


# --------------------------------------------------------------------------- report


def report(results: dict[str, Any], baseline: str = OFFICIAL) -> str:
    """Graphkeep against `baseline` (the official server, or graphkeep from another tree)."""
    gk, off = results.get(GRAPHKEEP, {}), results.get(baseline, {})
    head = (
        f"{'operation':<17}{'gk p50':>9}{'off p50':>9}{'ratio':>7}"
        f"{'gk p95':>9}{'off p95':>9}{'ratio':>7}{'gk rps':>9}{'off rps':>9}{'ratio':>7}"
    )
    lines = [head]
    for op in OPERATIONS + MORE_OPERATIONS:
        g, o = gk.get(op), off.get(op)
        if not g:
            continue
        if not o:
            lines.append(f"{op:<17}{g['median_ms']:>9.2f}{'-':>9}{'-':>7}{g['p95_ms']:>9.2f}")
            continue
        lines.append(
            f"{op:<17}{g['median_ms']:>9.2f}{o['median_ms']:>9.2f}"
            f"{g['median_ms'] / o['median_ms']:>7.2f}"
            f"{g['p95_ms']:>9.2f}{o['p95_ms']:>9.2f}{g['p95_ms'] / o['p95_ms']:>7.2f}"
            f"{g['rps']:>9.0f}{o['rps']:>9.0f}{g['rps'] / o['rps']:>7.2f}"
        )
    lines.append(
        f"against {baseline}; latency in ms; latency ratio = graphkeep / {baseline} (below 1: "
        f"graphkeep faster); rps ratio = graphkeep / {baseline} (above 1: graphkeep faster)"
    )
    return "\n".join(lines)


def save(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="rounds per operation")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured rounds first")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=4, help="throughput blocks per server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="60 rounds per operation")
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument(
        "--baseline-tree", type=Path, help="also serve graphkeep from this source tree"
    )
    parser.add_argument(
        "--ops",
        nargs="+",
        choices=OPERATIONS + MORE_OPERATIONS,
        default=list(OPERATIONS),
        help="the operations to run (default: the issue's four, get_state twice)",
    )
    parser.add_argument("--ops-all", action="store_true", help="also every MORE_OPERATIONS")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "api_bench.json"))
    args = parser.parse_args()
    if args.quick:
        args.requests = 60
    if args.ops_all:
        args.ops = list(OPERATIONS + MORE_OPERATIONS)
    tmp = Path(tempfile.mkdtemp(prefix="gk_api_bench_"))
    shutil.copy(GRAPH_SOURCE, tmp / "graph.py")
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"approval": "./graph.py:graph"}})
    )
    async with AsyncExitStack() as stack:
        targets = [
            Target(
                GRAPHKEEP, await stack.enter_async_context(graphkeep_server(tmp)), args.concurrency
            )
        ]
        if args.baseline_tree is not None:
            tree = args.baseline_tree.resolve()
            url = await stack.enter_async_context(graphkeep_server(tmp, tree))
            targets.append(Target(BASELINE, url, args.concurrency))
        if not args.skip_official:
            url = await stack.enter_async_context(langgraph_dev_server(tmp, progress))
            targets.append(Target(OFFICIAL, url, args.concurrency))
        for t in targets:
            stack.push_async_callback(t.aclose)
        results = await bench(targets, args)
    results["settings"] = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "blocks": args.blocks,
        "order": "alternating, shuffled per round",
    }
    save(Path(args.output), results)
    print(json.dumps(results, indent=2))
    for baseline in (OFFICIAL, BASELINE):
        if baseline in results:
            print(report(results, baseline))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

"""CPU per API request, in process: this tree against another graphkeep tree, same run.

Each tree serves from its own child process (httpx ASGI transport, no sockets, PostgreSQL,
workers=0) on its own fresh database. The parent asks the children in turn, one operation at
a time (`--requests` of it from one tree, then from the other, the first of the pair
alternating), so machine load hits both halves of a pair alike. Per operation it reports the
median of the per-turn medians of CPU time (`time.process_time`, the server's own work: the
database server's CPU is another process) and wall time per request, and the ratio of this
tree to the baseline: the median (and the range) of the pairs' ratios.

- thread_get      GET  /threads/{id}
- thread_create   POST /threads {}
- run_create      POST /threads/{id}/runs on a fresh thread (the run stays pending)
- run_get         GET  /threads/{id}/runs/{run_id}
- assistant_search POST /assistants/search {"limit": 10} (the example graphs' assistants)
- state_get       GET  /threads/{id}/state on a thread of the approval graph (one checkpoint)

    python bench/api_cpu_bench.py --baseline-tree /path/to/old/checkout
    python bench/api_cpu_bench.py --baseline-tree /old --rounds 60 --requests 50  # more pairs
    python bench/api_cpu_bench.py --profile thread_get   # cProfile of this tree (or of
        # --baseline-tree when given), top 45 by --sort; CPU time; --dump FILE keeps it
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import BenchChild, pg_database

ROOT = Path(__file__).resolve().parents[1]
OPS = ("thread_get", "thread_create", "run_create", "run_get", "assistant_search", "state_get")
PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/{db}"


# --------------------------------------------------------------------------- child


async def _child(db: str) -> None:
    import httpx

    from app.config import Settings
    from app.db import migrate
    from app.db.engine import create_engine
    from app.main import create_app

    url = PG_URL.format(db=db)
    engine = create_engine(url, pool_size=1, max_overflow=0)
    await migrate.upgrade(engine)
    await engine.dispose()
    # the server's own pool (its size decides how many connections stay parked: app.db.park)
    settings = Settings(database_url=url, workers=0)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            await _serve(client)


async def _serve(client: Any) -> None:
    thread_id = (await client.post("/threads", json={})).json()["thread_id"]
    run = (
        await client.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": "agent", "input": {"messages": []}}
        )
    ).json()
    run_path = f"/threads/{thread_id}/runs/{run['run_id']}"
    body = {"metadata": {"graph_id": "approval"}}
    state_thread = (await client.post("/threads", json=body)).json()["thread_id"]
    update = {"values": {"request": "x"}, "as_node": "propose"}
    assert (await client.post(f"/threads/{state_thread}/state", json=update)).status_code == 200

    async def fresh_thread() -> str:
        r = await client.post("/threads", json={})
        return str(r.json()["thread_id"])

    async def one(op: str) -> tuple[float, float]:
        if op == "thread_get":
            call = client.get(f"/threads/{thread_id}")
        elif op == "thread_create":
            call = client.post("/threads", json={})
        elif op == "run_create":
            tid = await fresh_thread()
            body = {"assistant_id": "agent", "input": {"messages": []}}
            call = client.post(f"/threads/{tid}/runs", json=body)
        elif op == "assistant_search":
            call = client.post("/assistants/search", json={"limit": 10})
        elif op == "state_get":
            call = client.get(f"/threads/{state_thread}/state")
        else:
            call = client.get(run_path)
        cpu, wall = time.process_time(), time.perf_counter()
        r = await call
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert r.status_code == 200, (op, r.status_code, r.text)
        return cpu, wall

    for op in OPS:  # warm up: compiled caches, prepared statements
        for _ in range(30):
            await one(op)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        cmd = json.loads(line)
        if cmd.get("profile"):
            import cProfile
            import pstats

            # CPU time, not wall time: on a loaded machine wall time is mostly waiting
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            for _ in range(cmd["n"]):
                await one(cmd["profile"])
            prof.disable()
            if cmd.get("dump"):
                prof.dump_stats(cmd["dump"])  # for pstats' callers / callees views
            pstats.Stats(prof).sort_stats(cmd.get("sort", "cumulative")).print_stats(45)
            sys.stdout.flush()
            print(json.dumps({"done": True}), flush=True)
            continue
        out: dict[str, Any] = {}
        for op in cmd.get("ops", OPS):
            samples = [await one(op) for _ in range(cmd["n"])]
            out[op] = {
                "cpu": statistics.median(s[0] for s in samples),
                "wall": statistics.median(s[1] for s in samples),
            }
        print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------- parent


class Child(BenchChild):
    def __init__(self, tree: Path, db: str) -> None:
        super().__init__(Path(__file__), ["--child", db], tree, str(tree))

    def ask(self, cmd: dict[str, Any], *, echo: bool = True) -> dict[str, Any]:
        return super().ask(cmd, echo=echo)


def main(args: argparse.Namespace) -> None:
    trees = {"candidate": ROOT}
    if args.profile and args.baseline_tree:  # profile the baseline tree instead
        trees = {"candidate": Path(args.baseline_tree).resolve()}
    elif args.baseline_tree:
        trees = {"baseline": Path(args.baseline_tree).resolve(), "candidate": ROOT}
    dbs = {name: f"gk_cpubench_{name}_{uuid.uuid4().hex[:8]}" for name in trees}
    for db in dbs.values():
        asyncio.run(pg_database("create", db))
    children: dict[str, Child] = {}
    try:
        # the child code is this file, run against each tree's `app` package
        for name, tree in trees.items():
            children[name] = Child(tree, dbs[name])
        if args.profile:
            children["candidate"].ask(
                {"profile": args.profile, "n": args.requests, "sort": args.sort, "dump": args.dump}
            )
            return
        results: dict[str, dict[str, list[dict[str, float]]]] = {
            name: {op: [] for op in OPS} for name in trees
        }
        # One op at a time, the two trees back to back (the first of the pair alternating):
        # the two halves of a pair see the same machine, which on a shared host can change
        # speed by a third within seconds. The ratio is the median of the pairs' ratios.
        for i in range(args.rounds):
            for j, op in enumerate(OPS):
                order = list(trees) if (i + j) % 2 == 0 else list(reversed(trees))
                for name in order:
                    got = children[name].ask({"n": args.requests, "ops": [op]})
                    results[name][op].append(got[op])
        print(
            f"{args.rounds} rounds x {args.requests} requests per op and tree, the trees "
            f"back to back per op, load {os.getloadavg()[0]:.2f}"
        )
        for op in OPS:
            line = f"{op:14s}"
            for name in trees:
                cpu = statistics.median(r["cpu"] for r in results[name][op]) * 1e3
                wall = statistics.median(r["wall"] for r in results[name][op]) * 1e3
                line += f"  {name} cpu {cpu:6.3f} ms wall {wall:6.3f} ms"
            if "baseline" in trees:
                pairs = zip(results["candidate"][op], results["baseline"][op], strict=True)
                ratios = sorted(c["cpu"] / b["cpu"] for c, b in pairs)
                line += (
                    f"  cpu ratio {statistics.median(ratios):.2f}x"
                    f" ({ratios[0]:.2f}-{ratios[-1]:.2f})"
                )
            print(line)
    finally:
        for child in children.values():
            child.close()
        for db in dbs.values():
            asyncio.run(pg_database("drop", db))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-tree", default=None)
    parser.add_argument("--rounds", type=int, default=36, help="pairs per operation")
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per tree in a pair (default 50), or profiled (default 400)",
    )
    parser.add_argument("--profile", choices=OPS, default=None)
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--dump", default=None, help="with --profile: write the pstats file here")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, os.getcwd())
        asyncio.run(_child(args.child))
    else:
        if args.requests is None:
            args.requests = 400 if args.profile else 50
        main(args)

"""`alist` of a deep thread on PostgreSQL: SQLSaver vs AsyncPostgresSaver, for this tree and
another graphkeep tree in the same run.

bench/checkpoint_bench.py --short times list@1000 three times per saver, one tree per run:
too few samples, on a loaded machine, to compare two trees. Here each tree runs in its own
child process (its own `app` and its own bench/checkpoint_bench.py helpers, throwaway
databases), builds one thread of `--depth` checkpoints for each saver once, and the parent
alternates rounds between the trees. Per round each child times `--lists` full lists of
each saver, alternating savers; the report gives the median per saver and tree, the
SQLSaver / official ratio per tree (official time / ours: > 1, ours faster) and the ratio
of the two trees' SQLSaver times.

    python bench/checkpoint_list_bench.py --baseline-tree /tmp/old --rounds 6
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
from contextlib import AsyncExitStack
from pathlib import Path

from benchkit import BenchChild

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


async def _child(depth: int) -> None:
    import checkpoint_bench as cb  # this tree's helpers (sys.path: the tree's bench/)

    async with AsyncExitStack() as stack:
        ours_url = await stack.enter_async_context(cb.pg_database(ADMIN, "gk_listbench_ours"))
        theirs_url = await stack.enter_async_context(cb.pg_database(ADMIN, "gk_listbench_off"))
        ours = await stack.enter_async_context(cb.our_saver(ours_url, 10))
        theirs = await stack.enter_async_context(cb.official_pg(theirs_url, 10))
        run = uuid.uuid4().hex[:8]
        probes = (cb.Probe(ours, run), cb.Probe(theirs, run))
        for probe in probes:
            probe.configs[depth] = await cb.build_thread(probe.saver, f"d{depth}-{run}", depth)
            await probe.list_all(depth)  # warm: prepared statements, caches
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            n = json.loads(line)["n"]
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(n):
                for side, probe in enumerate(probes):
                    started = time.perf_counter()
                    await probe.list_all(depth)
                    times[side].append(time.perf_counter() - started)
            print(json.dumps({"ours": times[0], "official": times[1]}), flush=True)


class Child(BenchChild):
    def __init__(self, tree: Path, depth: int) -> None:
        pythonpath = f"{tree}{os.pathsep}{tree / 'bench'}"
        super().__init__(Path(__file__), ["--child", str(depth)], tree, pythonpath)


def main(args: argparse.Namespace) -> None:
    trees = {"candidate": ROOT}
    if args.baseline_tree:
        trees = {"baseline": Path(args.baseline_tree).resolve(), "candidate": ROOT}
    children = {name: Child(tree, args.depth) for name, tree in trees.items()}
    samples: dict[str, dict[str, list[float]]] = {
        name: {"ours": [], "official": []} for name in trees
    }
    loads: list[float] = []
    try:
        for i in range(args.rounds):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                got = children[name].ask({"n": args.lists})
                for side in ("ours", "official"):
                    samples[name][side].extend(got[side])
            loads.append(os.getloadavg()[0])
    finally:
        for child in children.values():
            child.close()
    print(
        f"list@{args.depth}: {args.rounds} alternating rounds x {args.lists} lists per saver, "
        f"load {min(loads):.2f}-{max(loads):.2f}"
    )
    ours_median: dict[str, float] = {}
    for name in trees:
        ours = statistics.median(samples[name]["ours"]) * 1e3
        official = statistics.median(samples[name]["official"]) * 1e3
        ours_median[name] = ours
        print(
            f"  {name:9s} SQLSaver {ours:8.1f} ms  official {official:8.1f} ms  "
            f"official/ours {official / ours:5.2f}x"
        )
    if "baseline" in ours_median:
        ratio = ours_median["candidate"] / ours_median["baseline"]
        print(f"  SQLSaver time candidate / baseline {ratio:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-tree", default=None)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--lists", type=int, default=3, help="lists per saver per round")
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(int(args.child)))
    else:
        main(args)

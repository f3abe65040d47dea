"""The queue's hot statements against a baseline tree, end to end: claim, lease renewal,
the reaper's pass (with the liveness test), release, and a NOTIFY sent in a transaction.

Both trees run the same cycle on the same databases (PostgreSQL and SQLite), each side in a
process of its own (two trees cannot share one interpreter), alternating side by side in
rounds within one run, so the machine's noise hits both alike. Prints per-operation medians
(ms) and the ratio ours / baseline.

    python bench/runs_queries_bench.py [--baseline main] [--rounds 8] [--cycles 150]

`--side DIR` is the per-round worker (internal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OPS = ("claim", "renew", "reap", "release", "notify")


async def _side(url: str, cycles: int) -> dict[str, list[float]]:
    """One round in this tree: `cycles` times claim, renew, reap, release, notify."""
    from app.db.access import transaction
    from app.db.engine import create_engine
    from app.db.tables import runs, threads
    from app.db.types import utcnow
    from app.runs import notify, queue

    engine = create_engine(url)
    worker_id = f"bench:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    queue.register_live_worker(worker_id, alive=True)  # SQLite: this process is alive
    holder = None
    try:
        if engine.dialect.name == "postgresql":  # hold the liveness lock, as a worker does
            try:
                from app.runs.queue_queries import liveness_lock
            except ImportError:  # a baseline from before app/runs/queue_queries.py
                liveness_lock = queue.liveness_lock  # type: ignore[attr-defined]
            holder = await engine.connect()
            await holder.execution_options(isolation_level="AUTOCOMMIT")
            await holder.execute(liveness_lock(worker_id))
        tid, rid, now = str(uuid.uuid4()), str(uuid.uuid4()), utcnow()
        async with engine.begin() as conn:
            await conn.execute(
                threads.insert().values(
                    thread_id=tid, tenant_id="b", status="busy", metadata={}, config={},
                    values=None, interrupts={}, created_at=now, updated_at=now,
                    state_updated_at=now,
                )
            )  # fmt: skip
            await conn.execute(
                runs.insert().values(
                    run_id=rid, tenant_id="b", thread_id=tid, assistant_id=str(uuid.uuid4()),
                    graph_id="g", status="pending", attempt=0, metadata={}, kwargs={},
                    multitask_strategy="enqueue", created_at=now, updated_at=now,
                    available_at=now,
                )
            )  # fmt: skip
        samples: dict[str, list[float]] = {op: [] for op in OPS}

        async def timed(op: str, work: Any) -> Any:
            started = time.perf_counter()
            result = await work
            samples[op].append(time.perf_counter() - started)
            return result

        for _ in range(cycles):
            claimed = await timed(
                "claim", queue.claim(engine, worker_id=worker_id, lease_seconds=30)
            )
            assert claimed is not None and claimed.run_id == rid, "the bench run was not claimed"
            state = await timed(
                "renew",
                queue.renew(
                    engine, run_id=rid, worker_id=worker_id, lease_seconds=30,
                    attempt=claimed.attempt,
                ),
            )  # fmt: skip
            assert state.held
            reaped = await timed("reap", queue.reap_expired(engine, own_worker_id=worker_id))
            assert reaped == [], "a live worker's run was reaped"

            async def release(attempt: int) -> None:
                async with transaction(engine) as conn:
                    await queue.release(conn, run_id=rid, worker_id=worker_id, attempt=attempt)

            await timed("release", release(claimed.attempt))

            async def send() -> None:
                async with transaction(engine) as conn:
                    await notify.send(conn, notify.queued("bench"))

            await timed("notify", send())
        async with engine.begin() as conn:
            await conn.execute(runs.delete().where(runs.c.run_id == rid))
            await conn.execute(threads.delete().where(threads.c.thread_id == tid))
        return samples
    finally:
        if holder is not None:
            await holder.close()
        await engine.dispose()


def _run_side(tree: Path, url: str, cycles: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'sdk'}"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--side", str(tree), "--url", url,
         "--cycles", str(cycles)],
        cwd=tree, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    samples: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return samples


def _compare(trees: dict[str, Path], url: str, dialect: str, rounds: int, cycles: int) -> Any:
    got: dict[str, dict[str, list[float]]] = {side: {op: [] for op in OPS} for side in trees}
    for rnd in range(rounds):  # alternating order: neither side always runs first
        for side in list(trees) if rnd % 2 == 0 else list(reversed(trees)):
            for op, samples in _run_side(trees[side], url, cycles).items():
                got[side][op].extend(samples[cycles // 10 :])  # drop each round's warm-up
    out: dict[str, Any] = {"dialect": dialect}
    for op in OPS:
        base = statistics.median(got["baseline"][op]) * 1000
        ours = statistics.median(got["ours"][op]) * 1000
        out[op] = {
            "baseline_ms": round(base, 3),
            "ours_ms": round(ours, 3),
            "ratio": round(ours / base, 3),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="main", help="git ref of the baseline tree")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=150)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(asyncio.run(_side(args.url, args.cycles))))
        return

    sys.path.insert(0, str(ROOT))
    from app.db import migrate
    from app.db.engine import create_engine
    from tests.conftest import create_pg_database, drop_pg_database

    async def migrated(url: str) -> None:
        engine = create_engine(url)
        try:
            await migrate.upgrade(engine)
        finally:
            await engine.dispose()

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        # ours is copied out too (tracked and untracked files): both sides then run from
        # the same kind of directory, with nothing in the worktree but the code deciding
        ours = Path(tmp) / "ours"
        ours.mkdir()
        files = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        packed = subprocess.run(
            ["tar", "-c", "--null", "-T", "-"], cwd=ROOT, input=files, check=True,
            capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(ours)], input=packed, check=True)
        trees = {"baseline": base, "ours": ours}
        out = []
        pg = create_pg_database("gk_runsq_bench")
        try:
            asyncio.run(migrated(pg))
            out.append(_compare(trees, pg, "postgres", args.rounds, args.cycles))
        finally:
            drop_pg_database(pg)
        lite = f"sqlite+aiosqlite:///{tmp}/b.db"
        asyncio.run(migrated(lite))
        out.append(_compare(trees, lite, "sqlite", args.rounds, args.cycles))
    print(json.dumps({"baseline": args.baseline, "rounds": args.rounds, "results": out}, indent=2))


if __name__ == "__main__":
    main()

"""Crash recovery: kill -9 the process executing a run at a random moment, N trials.

PostgreSQL: an API process without workers and two `graphkeep worker`s; the worker holding the
run is killed and a replacement started. SQLite: the single `graphkeep serve` is killed and
started again on the same file. Default settings (30 s lease) unless given.

Reported per dialect: recovery (kill -> the run's next attempt claimed by a live process; on
SQLite this includes the restart), completion (kill -> run success), p50 / max; finished
nodes re-run (a node recorded before the kill that ran again) and runs lost.

    python bench/recovery_bench.py --trials 20 [--dialect postgres|sqlite|both]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client
from sqlalchemy import select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db.engine import create_engine  # noqa: E402
from app.db.tables import runs  # noqa: E402
from tests.conftest import _migrate, create_pg_database, drop_pg_database  # noqa: E402
from tests.e2e.runs_fixtures import read_records  # noqa: E402
from tests.e2e.runs_server import Proc, serve, worker  # noqa: E402

NODE_SLEEP = 1.5  # "b" sleeps this long: a run is a (instant), b, c (instant)


async def _holder(db_url: str, run_id: str) -> tuple[int, str | None, str]:
    engine = create_engine(db_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    select(runs.c.attempt, runs.c.worker_id, runs.c.status).where(
                        runs.c.run_id == run_id
                    )
                )
            ).one()
        return int(row.attempt), row.worker_id, str(row.status)
    finally:
        await engine.dispose()


async def _wait_claim(db_url: str, run_id: str, *, attempt: int, within: float = 60) -> int:
    """The pid of the process holding `attempt` of the run (polled every 20 ms)."""
    deadline = time.monotonic() + within
    while True:
        got, worker_id, status = await _holder(db_url, run_id)
        if got >= attempt and worker_id:
            return int(worker_id.split(":")[1])
        if got >= attempt and status == "success":
            return -1
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} not claimed again")
        await asyncio.sleep(0.02)


async def _trial(
    url: str, db_url: str, record: Path, kill: Any, *, restart: Any = None
) -> dict[str, Any]:
    client = get_client(url=url)
    tag = f"b-{uuid.uuid4().hex[:8]}"
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "steps", input={"tag": tag, "sleep": NODE_SLEEP})
    pid = await _wait_claim(db_url, run["run_id"], attempt=1)
    await asyncio.sleep(random.uniform(0.05, NODE_SLEEP))  # a random moment of the run
    before = [n for n, _ in read_records(record, tag)]
    kill(pid)
    killed = time.monotonic()
    if restart is not None:
        url = await restart()
        client = get_client(url=url)
    attempt, _, status = await _holder(db_url, run["run_id"])
    if status == "success":  # it ended before the kill landed
        return {"skipped": True}
    await _wait_claim(db_url, run["run_id"], attempt=2)
    recovered = time.monotonic() - killed
    out = await client.runs.join(tid, run["run_id"])
    completed = time.monotonic() - killed
    nodes = [n for n, _ in read_records(record, tag)]
    rerun = sum(1 for n in before if nodes.count(n) > 1)
    final = (await client.runs.get(tid, run["run_id"]))["status"]
    return {
        "recovered_s": recovered,
        "completed_s": completed,
        "rerun_finished_nodes": rerun,
        "lost": int(final != "success" or out.get("trail") != ["a", "b", "c"]),
    }


def _summary(dialect: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in results if not r.get("skipped")]
    rec = sorted(r["recovered_s"] for r in done)
    comp = sorted(r["completed_s"] for r in done)
    return {
        "dialect": dialect,
        "trials": len(done),
        "recovery_p50_s": round(statistics.median(rec), 3),
        "recovery_max_s": round(rec[-1], 3),
        "completion_p50_s": round(statistics.median(comp), 3),
        "completion_max_s": round(comp[-1], 3),
        "finished_nodes_rerun": sum(r["rerun_finished_nodes"] for r in done),
        "runs_lost": sum(r["lost"] for r in done),
    }


async def bench_postgres(trials: int, env: dict[str, str], tmp: Path) -> dict[str, Any]:
    db_url = await asyncio.to_thread(create_pg_database, "gk_recovery")
    await _migrate(db_url)
    record = tmp / "pg-record.txt"
    results: list[dict[str, Any]] = []
    try:
        with serve(db_url, tmp, workers=0, env=env, name="api") as api:
            assert api.url is not None
            stacks: dict[int, Any] = {}

            def start_worker() -> None:
                cm = worker(db_url, tmp, concurrency=2, record_file=record, env=env)
                proc: Proc = cm.__enter__()
                stacks[proc.popen.pid] = (cm, proc)

            start_worker()
            start_worker()

            def kill(pid: int) -> None:
                cm, proc = stacks.pop(pid)
                proc.kill()
                cm.__exit__(None, None, None)

            try:
                while len(results) < trials:
                    outcome = await _trial(api.url, db_url, record, kill)
                    if not outcome.get("skipped"):
                        results.append(outcome)
                    while len(stacks) < 2:
                        await asyncio.to_thread(start_worker)
            finally:
                for cm, _proc in list(stacks.values()):
                    cm.__exit__(None, None, None)
    finally:
        await asyncio.to_thread(drop_pg_database, db_url)
    return _summary("postgres", results)


async def bench_sqlite(trials: int, env: dict[str, str], tmp: Path) -> dict[str, Any]:
    db_url = f"sqlite+aiosqlite:///{tmp / 'recovery.db'}"
    record = tmp / "sqlite-record.txt"
    results: list[dict[str, Any]] = []
    current: dict[str, Any] = {}

    def start() -> str:
        cm = serve(db_url, tmp, workers=2, record_file=record, env=env)
        proc = cm.__enter__()
        current.update(cm=cm, proc=proc)
        return str(proc.url)

    def kill(_pid: int) -> None:
        current["proc"].kill()
        current["cm"].__exit__(None, None, None)

    async def restart() -> str:
        return await asyncio.to_thread(start)

    url = start()
    try:
        while len(results) < trials:
            outcome = await _trial(url, db_url, record, kill, restart=restart)
            url = str(current["proc"].url)
            if not outcome.get("skipped"):
                results.append(outcome)
    finally:
        current["cm"].__exit__(None, None, None)
    return _summary("sqlite", results)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--dialect", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--lease", type=float, default=None, help="default: the server's (30 s)")
    args = parser.parse_args()
    env = {} if args.lease is None else {"GRAPHKEEP_LEASE_SECONDS": str(args.lease)}
    out = []
    with tempfile.TemporaryDirectory(prefix="gk_recovery_") as tmp:
        if args.dialect in ("postgres", "both"):
            out.append(await bench_postgres(args.trials, env, Path(tmp)))
        if args.dialect in ("sqlite", "both"):
            out.append(await bench_sqlite(args.trials, env, Path(tmp)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())

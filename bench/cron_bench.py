"""Cron scheduler benchmark: N enabled crons due at the same instant, two scheduler processes
on one PostgreSQL. Measures scheduling lag (due time -> run row created: p50, p95, max),
double firings and missed firings, then EXPLAINs an idle poll's queries with N crons not due.
Prints the load average before and after and the CPU seconds the two scheduler processes used
(per 1,000 firings): on a shared 2-core machine the lag mostly measures the load, the CPU
figure measures the scheduler.

Each scheduler process is the real CronScheduler and RunService (no workers: the runs stay
pending, so only scheduling is timed). The crons are stateless (on_run_completed=keep)
and yearly: one due time each.

    python bench/cron_bench.py                  # 10,000 crons (needs PostgreSQL on :5432)
    python bench/cron_bench.py --crons 2000     # smaller
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchkit import PG_ADMIN_DSN, pg_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GRAPHS = ROOT / "tests" / "graphs" / "langgraph.json"

from sqlalchemy import func, insert, select  # noqa: E402
from sqlalchemy.dialects import postgresql  # noqa: E402

from app.assistants.service import ensure_system_assistants, system_assistant_id  # noqa: E402
from app.crons import queries as cron_queries  # noqa: E402
from app.crons.scheduler import CronScheduler  # noqa: E402
from app.db import migrate  # noqa: E402
from app.db.engine import create_engine  # noqa: E402
from app.db.tables import crons, runs  # noqa: E402
from app.db.types import utcnow  # noqa: E402
from app.graphs.registry import load_registry  # noqa: E402
from app.runs.events import EventHub  # noqa: E402
from app.runs.service import RunService  # noqa: E402


def _url(name: str) -> str:
    base = PG_ADMIN_DSN.rsplit("/", 1)[0]
    return f"{base}/{name}"


async def scheduler_process(url: str, batch: int, concurrency: int) -> None:
    """One scheduler, as `graphkeep serve`/`worker` runs it, until SIGTERM."""
    engine = create_engine(url, pool_size=4)
    graphs = await load_registry(GRAPHS)
    hub = EventHub(engine, retention_seconds=3600, keepalive_seconds=15)
    await hub.start()
    service = RunService(engine=engine, hub=hub, graphs=graphs, saver=None)
    scheduler = CronScheduler(
        engine=engine, runs=service, poll_seconds=0.1, batch_size=batch, concurrency=concurrency
    )
    task = asyncio.ensure_future(scheduler.run_forever())
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    print("ready", flush=True)
    started = time.process_time()
    try:
        await task
    except asyncio.CancelledError:
        pass
    print(f"cpu {time.process_time() - started}", flush=True)  # after start-up, idle included
    await hub.stop()
    await engine.dispose()


def _spawn_schedulers(url: str, batch: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--scheduler", url, "--batch", str(batch)]
            + ["--concurrency", str(concurrency)],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
    return procs


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


async def main(n: int, batch: int, lead: float, concurrency: int) -> None:
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    name = f"gk_cron_bench_{uuid.uuid4().hex[:8]}"

    await pg_database("create", name)
    url = _url(name)
    engine = create_engine(url)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await migrate.upgrade(engine)
        graphs = await load_registry(GRAPHS)
        await ensure_system_assistants(engine, graphs=graphs)
        assistant = system_assistant_id("steps")
        procs.extend(await asyncio.to_thread(_spawn_schedulers, url, batch, concurrency))
        due = utcnow() + timedelta(seconds=lead)
        now = utcnow()
        rows = [
            {
                "cron_id": str(uuid.uuid4()),
                "tenant_id": "bench",
                "assistant_id": assistant,
                "thread_id": None,
                "user_id": "bench",
                "schedule": "0 0 1 1 *",  # the next slot is far: one due time only
                "timezone": "UTC",
                "next_run_date": due,
                "end_time": None,
                "enabled": True,
                "status": "active",
                "on_run_completed": "keep",
                "payload": {"input": {"tag": "bench"}},
                "metadata": {},
                "created_at": now,
                "updated_at": now,
            }
            for _ in range(n)
        ]
        async with engine.begin() as conn:
            for i in range(0, n, 1000):
                await conn.execute(insert(crons), rows[i : i + 1000])
        print(f"{n} crons due at {due.isoformat()} ({lead:.0f} s from now); two schedulers")
        deadline = time.monotonic() + lead + 300
        seen: list[tuple[float, int]] = []  # (seconds after the due time, runs committed)
        while True:
            async with engine.connect() as conn:
                made = (await conn.execute(select(func.count()).select_from(runs))).scalar_one()
            seen.append(((utcnow() - due).total_seconds(), made))
            if made >= n or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)  # both schedulers keep ticking: a double firing would show
        async with engine.connect() as conn:
            created = (await conn.execute(select(runs.c.created_at, runs.c.metadata))).all()
        per_cron: dict[str, int] = {}
        lags = []
        for created_at, metadata in created:
            per_cron[metadata["cron_id"]] = per_cron.get(metadata["cron_id"], 0) + 1
            lags.append((created_at - due).total_seconds())
        doubles = sum(1 for v in per_cron.values() if v > 1)
        missed = n - len(per_cron)
        lags.sort()
        print(f"first run created {lags[0]:.3f} s after the due time (wake-up alignment)")
        print(
            f"lag p50 {_pct(lags, 50):.3f} s, p95 {_pct(lags, 95):.3f} s, max {lags[-1]:.3f} s; "
            f"all {n} fired within {lags[-1]:.1f} s ({n / max(lags[-1], 1e-9):.0f} firings/s)"
        )

        # created_at is the claiming tick's clock; a run is visible to workers only once its
        # tick commits: the lag until committed, from the polled counts (+- 50 ms)
        def visible(share: float) -> float:
            return next((t for t, made in seen if made >= share * n), float("nan"))

        print(
            f"committed lag p50 {visible(0.5):.3f} s, p95 {visible(0.95):.3f} s, "
            f"all {visible(1.0):.3f} s"
        )
        print(f"double firings {doubles}, missed {missed}")
        # an idle poll: the claim (finds nothing), the due count (a gauge), the next due time
        idle = {
            "claim": cron_queries.claim_due("postgresql", now=utcnow(), limit=batch),
            "due count": cron_queries.count_due(utcnow()),
            "next due": cron_queries.next_due(utcnow()),
        }
        async with engine.begin() as conn:
            await conn.exec_driver_sql("ANALYZE crons")
            for label, stmt in idle.items():
                dialect = postgresql.dialect()
                sql = stmt.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
                plan = (await conn.exec_driver_sql(f"EXPLAIN ANALYZE {sql}")).all()
                print(f"idle poll, {label}, with {n} crons not due (EXPLAIN ANALYZE):")
                for (line,) in plan:
                    print("   ", line)
    finally:
        cpu = 0.0
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                out, _ = p.communicate(timeout=20)
                cpu += sum(
                    float(x.split()[1]) for x in out.decode().splitlines() if x[:4] == "cpu "
                )
            except subprocess.TimeoutExpired:
                p.kill()
        await engine.dispose()
        await pg_database("drop", name)
    # the schedulers' own CPU from ready to exit (idle ticks included; PostgreSQL's not)
    print(f"scheduler processes' CPU {cpu:.2f} s ({cpu / n * 1000:.3f} s per 1,000 firings)")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crons", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=1, help="ticks in flight per process")
    parser.add_argument("--lead", type=float, default=3.0, help="seconds until they are due")
    parser.add_argument("--scheduler", default=None, help=argparse.SUPPRESS)
    args: Any = parser.parse_args()
    os.environ.setdefault("GRAPHKEEP_LOG_LEVEL", "WARNING")
    if args.scheduler and os.environ.get("CRON_BENCH_PROFILE"):  # where a scheduler's time goes
        import cProfile

        cProfile.run(
            "asyncio.run(scheduler_process(args.scheduler, args.batch, args.concurrency))",
            f"{os.environ['CRON_BENCH_PROFILE']}.{os.getpid()}",
        )
    elif args.scheduler:
        asyncio.run(scheduler_process(args.scheduler, args.batch, args.concurrency))
    else:
        asyncio.run(main(args.crons, args.batch, args.lead, args.concurrency))

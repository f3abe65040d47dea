"""What fencing costs: the plain SQLSaver's put / put_writes vs the fenced per-run view the
executor hands to graphs (app/runs/fenced_saver.py), interleaved in one process, same engine,
on PostgreSQL and SQLite. Prints median latencies and the ratio fenced / plain.

    python bench/fencing_bench.py [--repeat 300]
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
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.checkpoint import SQLSaver
from app.db import migrate
from app.db.engine import create_engine
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.runs.fenced_saver import fenced
from app.runs.fencing import FencingToken
from tests.conftest import create_pg_database, drop_pg_database


async def _running_run(engine: Any) -> tuple[str, str]:
    tid, rid, now = str(uuid.uuid4()), str(uuid.uuid4()), utcnow()
    async with engine.begin() as conn:
        await conn.execute(
            threads.insert().values(
                thread_id=tid, tenant_id="b", status="busy", metadata={}, config={},
                values=None, interrupts={}, created_at=now, updated_at=now, state_updated_at=now,
            )
        )  # fmt: skip
        await conn.execute(
            runs.insert().values(
                run_id=rid, tenant_id="b", thread_id=tid, assistant_id=str(uuid.uuid4()),
                graph_id="g", status="running", attempt=1, metadata={}, kwargs={},
                multitask_strategy="enqueue", created_at=now, updated_at=now, available_at=now,
            )
        )  # fmt: skip
    return tid, rid


async def _measure(saver: Any, tid: str, repeat: int) -> dict[str, list[float]]:
    put: list[float] = []
    writes: list[float] = []
    config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    for i in range(repeat):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        cp["channel_values"] = {"messages": [f"m{i}" * 20], "step": i}
        versions = {"messages": f"{i + 1:032}.0", "step": f"{i + 1:032}.0"}
        cp["channel_versions"] = versions
        started = time.perf_counter()
        stored = await saver.aput(config, cp, {"step": i}, versions)
        put.append(time.perf_counter() - started)
        started = time.perf_counter()
        await saver.aput_writes(stored, [("messages", f"w{i}"), ("step", i)], f"task-{i}")
        writes.append(time.perf_counter() - started)
        config = stored
    return {"put": put, "put_writes": writes}


async def bench(url: str, dialect: str, repeat: int) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        await migrate.upgrade(engine)
        plain = SQLSaver(engine, tenant_id="b")
        results: dict[str, dict[str, list[float]]] = {"plain": {}, "fenced": {}}
        for rnd in range(6):  # interleaved rounds: the machine's noise hits both alike
            for kind in ("plain", "fenced") if rnd % 2 == 0 else ("fenced", "plain"):
                tid, rid = await _running_run(engine)
                saver = plain if kind == "plain" else fenced(plain, FencingToken(rid, 1), print)
                got = await _measure(saver, tid, repeat // 6)
                for op, samples in got.items():
                    results[kind].setdefault(op, []).extend(samples)
        out: dict[str, Any] = {"dialect": dialect}
        for op in ("put", "put_writes"):
            p = statistics.median(results["plain"][op]) * 1000
            f = statistics.median(results["fenced"][op]) * 1000
            out[op] = {"plain_ms": round(p, 3), "fenced_ms": round(f, 3), "ratio": round(f / p, 3)}
        return out
    finally:
        await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    out = []
    pg = await asyncio.to_thread(create_pg_database, "gk_fence_bench")
    try:
        out.append(await bench(pg, "postgres", args.repeat))
    finally:
        await asyncio.to_thread(drop_pg_database, pg)
    with tempfile.TemporaryDirectory() as tmp:
        out.append(await bench(f"sqlite+aiosqlite:///{tmp}/b.db", "sqlite", args.repeat))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())

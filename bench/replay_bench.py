"""Thread-stream replay of a long log, this tree next to a base tree, in one run.

Issue 18's replay target (bench/thread_stream_bench.py's `replay_ms`): a new
`POST /threads/{t}/stream/events` with `since=0` on a thread whose log holds ~10,000 events,
read until its root `completed`, < 250 ms. That bench makes its log by streaming 5,000 words
through a run (minutes on a loaded machine) and serves one tree; this one makes the log once
and replays it many times on two servers at once, so a change to the read path is measured
side by side with its baseline:

1. one database (a fresh PostgreSQL one, or `--database-url`), migrated by this tree;
2. a graphkeep server of this tree and one of `--base` (e.g. `git archive main`) on it;
3. a real run of the chat graph (`--seed-words` words) gives a real log; its `messages` rows
   are repeated (fresh seqs) into a second thread until it holds `--events` events;
4. rounds alternate the servers' order; each replays that thread (`messages` + `lifecycle`)
   with thread_stream_bench's replay client: lines split as they come, lifecycle frames
   parsed on the clock to see the root `completed`, the rest parsed after it stops.

Both sides must deliver the same seqs. Reports medians and the ratio this / base.

    python -m bench.replay_bench --base /tmp/replay-base [--rounds 15] [--events 10000]
        [--database-url sqlite+aiosqlite:////tmp/x.db]
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
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.tables import thread_events
from bench.benchkit import CHAT_GRAPH, ROOT, clean_env, free_port, pg_database, process, wait_ready
from bench.thread_stream_bench import replay as stream_replay
from bench.thread_stream_bench import run_start, subscribe, until_completed

CHANNELS = ["messages", "lifecycle"]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@asynccontextmanager
async def server(tmp: Path, tree: Path, database_url: str, name: str) -> AsyncIterator[str]:
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=database_url,
        GRAPHKEEP_LOG_LEVEL="WARNING",
        PYTHONPATH=str(tree),
    )
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    cmd += ["--config", str(tmp / "langgraph.json")]
    with process(cmd, env, tmp / f"{name}.log", tree) as proc:
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url, proc, tmp / f"{name}.log")
        progress(f"{name} ready at {url} (pid {proc.pid}, tree {tree})")
        yield url


async def seed(
    http: httpx.AsyncClient, source_url: str, urls: set[str], words: int, events: int
) -> str:
    """A thread holding `events` events copied from a real run's log (run on `http`, whose
    database is `source_url`) in every database of `urls`; its id."""
    tid, q = str(uuid.uuid4()), asyncio.Queue[tuple[float, dict[str, Any]]]()
    task = asyncio.create_task(subscribe(http, tid, {"channels": CHANNELS}, q))
    await asyncio.sleep(0.2)
    await run_start(http, tid, " ".join(f"w{i}" for i in range(words)))
    await until_completed(q, 300)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    engine = create_async_engine(source_url)
    try:
        async with engine.connect() as conn:
            rows = [
                dict(r._mapping)
                for r in await conn.execute(
                    select(thread_events)
                    .where(thread_events.c.thread_id == tid)
                    .order_by(thread_events.c.seq)
                )
            ]
    finally:
        await engine.dispose()
    messages = [r for r in rows if r["method"] == "messages"]
    first, last = rows.index(messages[0]), rows.index(messages[-1])
    head, tail = rows[:first], rows[last + 1 :]
    body = [messages[i % len(messages)] for i in range(events - len(head) - len(tail))]
    target = str(uuid.uuid4())
    out = [
        {**row, "thread_id": target, "seq": seq, "event_id": str(seq)}
        for seq, row in enumerate([*head, *body, *tail], start=1)
    ]
    for url in urls:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                for start in range(0, len(out), 500):
                    await conn.execute(insert(thread_events), out[start : start + 500])
        finally:
            await engine.dispose()
    return target


async def replay(http: httpx.AsyncClient, tid: str) -> tuple[float, list[int]]:
    """thread_stream_bench's replay client (the clock measures the server), as seqs."""
    ms, events = await stream_replay(http, tid, CHANNELS)
    return ms, [event["seq"] for _, event in events]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="gk_replaybench_"))
    (tmp / "chat_graph.py").write_text(CHAT_GRAPH)
    graphs = {"agent": "./chat_graph.py:graph"}
    (tmp / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    trees = {"this": ROOT, "base": Path(args.base)}
    name = "" if args.database_url else f"gk_replaybench_{uuid.uuid4().hex[:8]}"
    url = args.database_url or f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    # SQLite is one process per database: each server gets its own file
    sqlite = url.startswith("sqlite")
    databases = {"this": url, "base": f"{url}.base" if sqlite else url}
    if name:
        await pg_database("create", name)
    try:
        for database_url in set(databases.values()):
            migrate = [sys.executable, "-m", "app.cli", "migrate"]
            env = clean_env(GRAPHKEEP_DATABASE_URL=database_url, PYTHONPATH=str(ROOT))
            proc = await asyncio.create_subprocess_exec(*migrate, env=env, cwd=ROOT)
            assert await proc.wait() == 0, "migrate failed"
        async with AsyncExitStack() as stack:
            urls = {
                side: await stack.enter_async_context(server(tmp, tree, databases[side], side))
                for side, tree in trees.items()
            }
            http = {
                side: await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=600))
                for side, url in urls.items()
            }
            progress(f"seeding {args.events} events from a {args.seed_words}-word run")
            tid = await seed(
                http["this"],
                databases["this"],
                set(databases.values()),
                args.seed_words,
                args.events,
            )
            times: dict[str, list[float]] = {side: [] for side in trees}
            expected: list[int] | None = None
            for n in range(args.rounds + 1):  # round 0 warms both up, not counted
                order = list(trees) if n % 2 == 0 else list(trees)[::-1]
                for side in order:
                    ms, seqs = await replay(http[side], tid)
                    expected = expected or seqs
                    if seqs != expected:
                        raise AssertionError(f"{side} replayed {len(seqs)} events, not the same")
                    if n:
                        times[side].append(ms)
            progress(f"{args.rounds} rounds done, {len(expected or [])} events each")
    finally:
        if name:
            await pg_database("drop", name)
    median = {side: round(statistics.median(v), 1) for side, v in times.items()}
    return {
        "database": "sqlite" if sqlite else "postgresql",
        "events": len(expected or []),
        "replay_ms_median": median,
        "ratio_this_over_base": round(median["this"] / median["base"], 2),
        "rounds_ms": {side: [round(v, 1) for v in vs] for side, vs in times.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", required=True, help="the baseline checkout (git archive of main)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--seed-words", type=int, default=100)
    ap.add_argument("--database-url", default="", help="default: a fresh PostgreSQL database")
    args = ap.parse_args()
    args.base = str(Path(args.base).absolute())
    print(json.dumps(asyncio.run(run(args)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Thread-stream protocol figures for graphkeep (graphkeep only; the official side by side of
bench/thread_stream_bench.py is not wired for the protocol yet).

- run.start -> first `values` event on an already open SSE stream (p50 / p90, ms);
- `messages` events per second through one subscription (the example `agent` graph echoes a
  long input token by token);
- replay of the thread's whole log with `since=0` (>= 10,000 events), ms;
- N idle subscribers (default 1,000) on one process: the server's RSS growth (MB) and how
  late their heartbeats come (p50 / p99 of the gap minus the keepalive, ms).

    python -m bench.thread_protocol_bench [--database-url URL | --pg] [--rounds 20]\
        [--words 10000] [--idle 1000] [--tree DIR]

`--pg` makes (migrates, then drops) a fresh PostgreSQL database; `--tree` serves another
checkout of graphkeep (e.g. `git archive` of a base commit) with this venv, so a base and a
candidate can be measured alternately in one shell loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import httpx

from bench.benchkit import pg_database


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _stream(
    http: httpx.AsyncClient, tid: str, body: dict[str, Any], sink: asyncio.Queue[Any]
) -> None:
    async with http.stream("POST", f"/threads/{tid}/stream/events", json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                await sink.put((time.perf_counter(), json.loads(line[6:])))


async def _command(http: httpx.AsyncClient, tid: str, params: dict[str, Any]) -> None:
    r = await http.post(
        f"/threads/{tid}/commands", json={"id": 1, "method": "run.start", "params": params}
    )
    assert r.json()["type"] == "success", r.text


async def bench(url: str, rounds: int, words: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        firsts = []
        for _ in range(rounds):
            tid, q = str(uuid.uuid4()), asyncio.Queue()
            task = asyncio.create_task(_stream(http, tid, {"channels": ["values"]}, q))
            await asyncio.sleep(0.05)
            t0 = time.perf_counter()
            await _command(
                http,
                tid,
                {
                    "assistant_id": "agent",
                    "input": {"messages": [{"role": "user", "content": "hi"}]},
                },
            )
            at, _ = await asyncio.wait_for(q.get(), 10)
            firsts.append((at - t0) * 1000)
            task.cancel()
        firsts.sort()
        out["run_start_first_values_p50_ms"] = statistics.median(firsts)
        out["run_start_first_values_p90_ms"] = firsts[int(len(firsts) * 0.9) - 1]
        tid, q = str(uuid.uuid4()), asyncio.Queue()
        task = asyncio.create_task(_stream(http, tid, {"channels": ["messages", "lifecycle"]}, q))
        await asyncio.sleep(0.05)
        text = " ".join(f"w{i}" for i in range(words))
        await _command(
            http,
            tid,
            {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}},
        )
        count, first, last = 0, None, 0.0
        while True:
            at, ev = await asyncio.wait_for(q.get(), 60)
            if ev["method"] == "messages":
                count += 1
                first = first or at
                last = at
            elif ev["params"]["data"].get("event") == "completed":
                break
        task.cancel()
        out["messages_events"] = count
        out["messages_per_second"] = count / (last - first) if first and last > first else 0.0
        t0 = time.perf_counter()
        q2: asyncio.Queue[Any] = asyncio.Queue()
        task = asyncio.create_task(
            _stream(http, tid, {"channels": ["messages", "lifecycle"], "since": 0}, q2)
        )
        seen = 0
        while seen < count + 2:
            await asyncio.wait_for(q2.get(), 60)
            seen += 1
        out["replay_events"] = seen
        out["replay_ms"] = (time.perf_counter() - t0) * 1000
        task.cancel()
    return out


KEEPALIVE = 2.0  # the bench server's stream_keepalive_seconds (the default is 5 s)


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def idle(url: str, pid: int, subscribers: int, seconds: float) -> dict[str, float]:
    """`subscribers` SSE streams on distinct idle threads; heartbeat gaps and RSS growth."""
    limits = httpx.Limits(max_connections=subscribers + 10, max_keepalive_connections=0)
    beats: list[list[float]] = [[] for _ in range(subscribers)]
    before = _rss_mb(pid)

    async def one(http: httpx.AsyncClient, n: int) -> None:
        body = {"channels": ["lifecycle", "input"]}
        async with http.stream("POST", f"/threads/{uuid.uuid4()}/stream/events", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith(": heartbeat"):
                    beats[n].append(time.perf_counter())

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        tasks = [asyncio.create_task(one(http, n)) for n in range(subscribers)]
        await asyncio.sleep(seconds)
        during = _rss_mb(pid)
        for task in tasks:
            task.cancel()
        errors = [e for e in await asyncio.gather(*tasks, return_exceptions=True) if e]
        failed = [e for e in errors if not isinstance(e, asyncio.CancelledError)]
        if failed:
            print(f"{len(failed)} subscribers failed: {failed[0]!r}", file=sys.stderr)
    late = sorted(
        (b - a - KEEPALIVE) * 1000 for ts in beats for a, b in zip(ts[1:], ts[2:], strict=False)
    )
    connected = sum(1 for ts in beats if ts)
    return {
        "idle_subscribers": connected,
        "idle_rss_before_mb": round(before, 1),
        "idle_rss_growth_mb": round(during - before, 1),
        "idle_heartbeat_gaps": len(late),
        "idle_heartbeat_late_p50_ms": round(statistics.median(late), 1) if late else -1,
        "idle_heartbeat_late_p99_ms": round(late[int(len(late) * 0.99) - 1], 1) if late else -1,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--database-url", default="")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--words", type=int, default=10000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--idle-seconds", type=float, default=4 * KEEPALIVE + 1)
    ap.add_argument("--pg", action="store_true", help="a fresh PostgreSQL database")
    ap.add_argument("--tree", default="", help="the graphkeep checkout to serve (default: this)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gk-proto-bench-")
    port = _port()
    tree = os.path.abspath(args.tree) if args.tree else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
    env["GRAPHKEEP_DATABASE_URL"] = args.database_url or f"sqlite+aiosqlite:///{tmp}/bench.db"
    env["GRAPHKEEP_LOG_LEVEL"] = "WARNING"
    env["GRAPHKEEP_STREAM_KEEPALIVE_SECONDS"] = str(KEEPALIVE)
    pg_name = ""
    if args.pg:
        pg_name = f"gk_protobench_{uuid.uuid4().hex[:8]}"
        asyncio.run(pg_database("create", pg_name))
        env["GRAPHKEEP_DATABASE_URL"] = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_name}"
    try:
        if env["GRAPHKEEP_DATABASE_URL"].startswith("postgresql"):
            migrate = [sys.executable, "-m", "app.cli", "migrate"]
            subprocess.run(migrate, env=env, cwd=tree, check=True, capture_output=True)
        figures = _serve_and_measure(args, env, tree, port)
    finally:
        if pg_name:
            asyncio.run(pg_database("drop", pg_name))
    print(json.dumps({"tree": tree or ".", **figures}, indent=2))
    return 0


def _serve_and_measure(
    args: argparse.Namespace, env: dict[str, str], tree: str | None, port: int
) -> dict[str, Any]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        figures: dict[str, Any] = (
            asyncio.run(bench(url, args.rounds, args.words)) if args.rounds else {}
        )
        if args.idle:
            figures |= asyncio.run(idle(url, proc.pid, args.idle, args.idle_seconds))
        return figures
    finally:
        proc.terminate()
        proc.wait(20)


if __name__ == "__main__":
    sys.exit(main())

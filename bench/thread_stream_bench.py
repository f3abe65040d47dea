"""Thread streams, graphkeep next to the official `langgraph dev` (in-memory) in one run.

Both servers serve the same graphs (`echo`, and `agent`: the token-streaming chat example) from
one langgraph.json. Rounds alternate between the servers so machine load hits both alike; the
report gives medians and ratios graphkeep / official (below 1 = graphkeep faster, except for
`messages_per_second` where above 1 = graphkeep faster).

Classic (`GET /threads/{t}/stream`, the SDK's `threads.join_stream`), from `runs.create`:
- classic_first_ms / classic_done_ms: first thread-stream event / its `run_done` metadata.

Protocol (`POST /threads/{t}/commands` + `POST /threads/{t}/stream/events`):
- first_values_ms: run.start -> first `values` event on an already open stream (p50, p90);
- messages_per_second: `messages` events through one subscription while `agent` echoes
  `--words` words (two chunks a word: 5,000 words give ~10,000 events);
- replay_ms: a new stream with `since=0` on that thread until its root `completed` (every
  event of the log; the official in-memory edition keeps a thread's events for its lifetime);
  replay_again_ms: the same replay once more, right after;
- idle: `--idle` subscribers on distinct idle threads, the process's RSS growth and how late
  heartbeats come (gap minus 5 s, the official's fixed interval; graphkeep is set to 5 s too).
Event counts must be equal on both sides, else the bench fails rather than print a ratio.

    python -m bench.thread_stream_bench [--rounds 20] [--stream-rounds 3] [--words 5000]
        [--idle 1000] [--database-url URL] [--tree DIR] [--skip-official]

graphkeep runs on a fresh PostgreSQL database (made, migrated, dropped) unless
`--database-url` names one (e.g. sqlite+aiosqlite:////tmp/x.db); `--tree` serves another
checkout of graphkeep (e.g. `git archive` of a base commit) with this venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from langgraph_sdk import get_client

from bench.benchkit import (
    CHAT_GRAPH,
    ECHO_GRAPH,
    ROOT,
    clean_env,
    free_port,
    langgraph_dev_process,
    pg_database,
    process,
    rss_mb,
    wait_ready,
)

KEEPALIVE = 5.0  # the official server's fixed SSE heartbeat interval (langgraph_api.sse)
Event = tuple[float, dict[str, Any]]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@asynccontextmanager
async def graphkeep(
    tmp: Path, tree: Path, database_url: str
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    name = "" if database_url else f"gk_tsbench_{uuid.uuid4().hex[:8]}"
    if name:
        await pg_database("create", name)
        database_url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=database_url,
        GRAPHKEEP_LOG_LEVEL="WARNING",
        GRAPHKEEP_STREAM_KEEPALIVE_SECONDS=str(KEEPALIVE),
        PYTHONPATH=str(tree),
    )
    try:
        if database_url.startswith("postgresql"):
            migrate = [sys.executable, "-m", "app.cli", "migrate"]
            await asyncio.to_thread(
                subprocess.run, migrate, env=env, cwd=tree, check=True, capture_output=True
            )
        port = free_port()
        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
        cmd += ["--config", str(tmp / "langgraph.json")]
        with process(cmd, env, tmp / "graphkeep.log", tree) as proc:
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url, proc, tmp / "graphkeep.log")
            progress(f"graphkeep ready at {url} (pid {proc.pid}, tree {tree})")
            yield url, proc
    finally:
        if name:
            await pg_database("drop", name)


# --------------------------------------------------------------------------- classic


async def classic_round(url: str) -> dict[str, float]:
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    stream = await client.threads.join_stream(tid)
    loop = asyncio.get_running_loop()
    first, done = loop.create_future(), loop.create_future()

    async def read() -> None:
        async for part in stream:
            now = time.perf_counter()
            if not first.done():
                first.set_result(now)
            data = part.data
            if (
                part.event == "metadata"
                and isinstance(data, dict)
                and data.get("status") == "run_done"
            ):
                done.set_result(now)
                return

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)  # joined
    started = time.perf_counter()
    await client.runs.create(tid, "echo", input={"text": "x"})
    try:
        t_first = await asyncio.wait_for(first, 30)
        t_done = await asyncio.wait_for(done, 30)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await client.aclose()
    return {
        "classic_first_ms": (t_first - started) * 1000,
        "classic_done_ms": (t_done - started) * 1000,
    }


# --------------------------------------------------------------------------- protocol


def root_completed(event: dict[str, Any]) -> bool:
    params = event.get("params", {})
    return (
        event.get("method") == "lifecycle"
        and params.get("namespace") == []
        and params.get("data", {}).get("event") == "completed"
    )


async def subscribe(
    http: httpx.AsyncClient, tid: str, body: dict[str, Any], sink: asyncio.Queue[Event]
) -> None:
    async with http.stream("POST", f"/threads/{tid}/stream/events", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                await sink.put((time.perf_counter(), json.loads(line[6:])))


async def run_start(http: httpx.AsyncClient, tid: str, text: str) -> None:
    params = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}}
    r = await http.post(
        f"/threads/{tid}/commands", json={"id": 1, "method": "run.start", "params": params}
    )
    assert r.json()["type"] == "success", r.text


async def until_completed(q: asyncio.Queue[Event], patience_s: float) -> list[Event]:
    events: list[Event] = []
    while not events or not root_completed(events[-1][1]):
        events.append(await asyncio.wait_for(q.get(), patience_s))
    return events


async def first_values_round(http: httpx.AsyncClient) -> dict[str, float]:
    tid, q = str(uuid.uuid4()), asyncio.Queue[Event]()
    task = asyncio.create_task(subscribe(http, tid, {"channels": ["values", "lifecycle"]}, q))
    await asyncio.sleep(0.1)  # the stream is open (it waits for the thread to exist)
    started = time.perf_counter()
    await run_start(http, tid, "hi")
    events = await until_completed(q, 30)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    first = next(at for at, ev in events if ev["method"] == "values")
    return {"first_values_ms": (first - started) * 1000}


async def messages_and_replay(http: httpx.AsyncClient, words: int) -> dict[str, float]:
    tid, q = str(uuid.uuid4()), asyncio.Queue[Event]()
    channels = ["messages", "lifecycle"]
    task = asyncio.create_task(subscribe(http, tid, {"channels": channels}, q))
    await asyncio.sleep(0.1)
    await run_start(http, tid, " ".join(f"w{i}" for i in range(words)))
    live = await until_completed(q, 600)
    task.cancel()
    stamps = [at for at, ev in live if ev["method"] == "messages"]
    replay_ms, replayed = await replay(http, tid, channels)
    # the same replay again: tells a server still busy after the run from the read itself
    replay_again_ms, again = await replay(http, tid, channels)
    for events in (replayed, again):
        if [ev["seq"] for _, ev in events] != [ev["seq"] for _, ev in live]:
            raise AssertionError(f"replay gave {len(events)} events, live {len(live)}")
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {
        "messages_events": len(stamps),
        "messages_per_second": len(stamps) / span if span else 0.0,
        "replay_events": len(replayed),
        "replay_ms": replay_ms,
        "replay_again_ms": replay_again_ms,
    }


async def replay(
    http: httpx.AsyncClient, tid: str, channels: list[str]
) -> tuple[float, list[Event]]:
    """A new stream with `since=0` until the root `completed`: its time and its events.

    The clock measures the server, not this client: frames are split into lines as they
    come, but only those that may be the root `completed` (a `lifecycle` event) are parsed
    while it runs; every other line is kept as received and parsed after it stops, for the
    seq-by-seq check against the live stream. (This replay went through `subscribe`'s
    queue, one `asyncio.wait_for` task per event: that client cost more than the server.)"""
    lines: list[str] = []
    body = {"channels": channels, "since": 0}
    started = time.perf_counter()
    async with http.stream("POST", f"/threads/{tid}/stream/events", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                lines.append(line)
                if "lifecycle" in line and root_completed(json.loads(line[6:])):
                    break
    elapsed_ms = (time.perf_counter() - started) * 1000
    done = time.perf_counter()
    return elapsed_ms, [(done, json.loads(line[6:])) for line in lines]


async def idle(url: str, pid: int, subscribers: int, seconds: float) -> dict[str, float]:
    """`subscribers` SSE streams on distinct idle threads; heartbeat gaps and RSS growth."""
    limits = httpx.Limits(max_connections=subscribers + 10, max_keepalive_connections=0)
    beats: list[list[float]] = [[] for _ in range(subscribers)]
    before = rss_mb(pid)

    async def one(http: httpx.AsyncClient, n: int) -> None:
        body = {"channels": ["lifecycle", "input"]}
        async with http.stream("POST", f"/threads/{uuid.uuid4()}/stream/events", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith(": heartbeat"):
                    beats[n].append(time.perf_counter())

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        tasks = [asyncio.create_task(one(http, n)) for n in range(subscribers)]
        await asyncio.sleep(seconds)
        during = rss_mb(pid)
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    failed = [e for e in results if e and not isinstance(e, asyncio.CancelledError)]
    if failed:
        progress(f"{len(failed)} idle subscribers failed: {failed[0]!r}")
    # The first beat's phase depends on when the stream opened; gaps from the second on.
    late = sorted(
        (b - a - KEEPALIVE) * 1000 for ts in beats for a, b in zip(ts[1:], ts[2:], strict=False)
    )
    return {
        "idle_subscribers_with_heartbeat": sum(1 for ts in beats if ts),
        "idle_rss_before_mb": round(before, 1),
        "idle_rss_growth_mb": round(during - before, 1),
        "idle_heartbeat_gaps": len(late),
        "idle_heartbeat_late_p50_ms": round(statistics.median(late), 1) if late else -1,
        "idle_heartbeat_late_p99_ms": round(late[max(0, int(len(late) * 0.99) - 1)], 1)
        if late
        else -1,
    }


# --------------------------------------------------------------------------- driver


async def alternate(
    targets: dict[str, str], rounds: int, measure: Callable[[str], Awaitable[dict[str, float]]]
) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    for n in range(rounds):
        order = list(targets.items())
        for name, url in order if n % 2 == 0 else order[::-1]:
            out[name].append(await measure(url))
    return out


def summarise(rounds: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for name, values in rounds.items():
        for key in values[0] if values else ():
            series = sorted(v[key] for v in values)
            summary.setdefault(name, {})[key] = round(statistics.median(series), 1)
            if key == "first_values_ms":
                summary[name]["first_values_p90_ms"] = round(
                    series[max(0, int(len(series) * 0.9) - 1)], 1
                )
    return summary


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="gk_tsbench_"))
    (tmp / "echo_graph.py").write_text(ECHO_GRAPH)
    (tmp / "chat_graph.py").write_text(CHAT_GRAPH)
    graphs = {"echo": "./echo_graph.py:graph", "agent": "./chat_graph.py:graph"}
    (tmp / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    tree = Path(args.tree) if args.tree else ROOT
    async with AsyncExitStack() as stack:
        servers = {
            "graphkeep": await stack.enter_async_context(graphkeep(tmp, tree, args.database_url))
        }
        if not args.skip_official:
            servers["official"] = await stack.enter_async_context(
                langgraph_dev_process(tmp, progress)
            )
        targets = {name: url for name, (url, _proc) in servers.items()}
        http = {
            name: await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=600))
            for name, url in targets.items()
        }
        by_url = {targets[name]: client for name, client in http.items()}
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in targets}

        def keep(part: dict[str, list[dict[str, float]]]) -> None:
            for name, values in part.items():
                rounds[name].extend(values)

        progress("warm-up")
        for name, url in targets.items():
            await classic_round(url)
            await first_values_round(http[name])
        summary: dict[str, dict[str, float]] = {name: {} for name in targets}
        progress(f"classic join stream, {args.rounds} rounds")
        part = await alternate(targets, args.rounds, classic_round)
        keep(part)
        for name, values in summarise(part).items():
            summary[name] |= values
        progress(f"run.start -> first values, {args.rounds} rounds")
        part = await alternate(targets, args.rounds, lambda url: first_values_round(by_url[url]))
        keep(part)
        for name, values in summarise(part).items():
            summary[name] |= values
        progress(f"messages ({args.words} words) and replay, {args.stream_rounds} rounds")
        part = await alternate(
            targets, args.stream_rounds, lambda url: messages_and_replay(by_url[url], args.words)
        )
        keep(part)
        for name, values in summarise(part).items():
            summary[name] |= values
        if args.idle:
            for name, (url, proc) in servers.items():
                progress(f"{args.idle} idle subscribers on {name}, {args.idle_seconds} s")
                summary[name] |= await idle(url, proc.pid, args.idle, args.idle_seconds)
    if "official" in summary:
        gk, off = summary["graphkeep"], summary["official"]
        if gk.get("messages_events") != off.get("messages_events") or gk.get(
            "replay_events"
        ) != off.get("replay_events"):
            raise AssertionError(f"event counts differ: graphkeep {gk}, official {off}")
        summary["ratio_graphkeep_over_official"] = {
            key: round(gk[key] / off[key], 2)
            for key in gk
            if key in off
            and off[key]
            and not key.endswith(
                ("events", "with_heartbeat", "gaps", "before_mb", "late_p50_ms", "late_p99_ms")
            )
        }
    return {
        "tree": str(tree),
        "note": "loaded machine unless said otherwise",
        "median": summary,
        "rounds": rounds,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=20, help="classic and first-values rounds")
    ap.add_argument("--stream-rounds", type=int, default=3, help="messages + replay rounds")
    ap.add_argument("--words", type=int, default=5000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--idle-seconds", type=float, default=4 * KEEPALIVE + 1)
    ap.add_argument("--database-url", default="", help="default: a fresh PostgreSQL database")
    ap.add_argument("--tree", default="", help="the graphkeep checkout to serve (default: this)")
    ap.add_argument("--skip-official", action="store_true")
    ap.add_argument("--out", default="bench/results/thread_stream.json")
    args = ap.parse_args()
    args.tree = str(Path(args.tree).absolute()) if args.tree else ""
    results = asyncio.run(run(args))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results["median"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One-thread benchmark: 100 sequential runs of a messages echo graph on ONE thread, through
graphkeep (PostgreSQL) and in-process on langgraph's own `AsyncPostgresSaver`.

Each run adds two messages (the input and the echo), so the thread's state grows to 200
messages over the 100 runs. What is measured is how each side's run latency grows with the
state: the median of the last 10 runs over the median of the first 10 (`growth`), and
graphkeep's growth over the library's (target: <= 1.5). The two sides alternate run by run
(graphkeep run i, then library run i), so load from elsewhere on the machine hits both alike.

    python bench/one_thread_bench.py                 # 100 runs, 1 round
    python bench/one_thread_bench.py --runs 100 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from benchkit import PG_ADMIN_DSN, pg_database
from server_bench import graphkeep_server, progress, save

ROOT = Path(__file__).resolve().parents[1]

# The messages echo graph: langgraph's own `add_messages` state (langchain-core comes with
# langgraph), as a chat graph keeps it; the state grows by two messages per run.
MESSAGES_GRAPH = """
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def echo(state: State) -> dict[str, Any]:
    return {"messages": [AIMessage(content=state["messages"][-1].content)]}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
graph = builder.compile()
"""


def growth(samples: list[float], window: int) -> dict[str, float]:
    first = statistics.median(samples[:window])
    last = statistics.median(samples[-window:])
    return {
        "first_p50_ms": round(first, 2),
        "last_p50_ms": round(last, 2),
        "growth": round(last / first, 2),
    }


def load_builder(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("one_thread_graph", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.builder


async def one_round(url: str, library_dsn: str, builder: Any, runs: int) -> dict[str, Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    server_ms: list[float] = []
    library_ms: list[float] = []
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as http,
        AsyncPostgresSaver.from_conn_string(library_dsn) as saver,
    ):
        await saver.setup()
        graph = builder.compile(checkpointer=saver)
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        for i in range(runs):
            body = {"messages": [{"role": "human", "content": str(i)}]}
            start = time.perf_counter()
            r = await http.post(
                f"/threads/{tid}/runs/wait", json={"assistant_id": "echo", "input": body}
            )
            r.raise_for_status()
            server_ms.append((time.perf_counter() - start) * 1000)
            assert len(r.json()["messages"]) == 2 * (i + 1), r.text
            start = time.perf_counter()
            out = await graph.ainvoke(body, config)
            library_ms.append((time.perf_counter() - start) * 1000)
            assert len(out["messages"]) == 2 * (i + 1)
    window = max(1, min(10, runs // 5))
    server, library = growth(server_ms, window), growth(library_ms, window)
    return {
        "graphkeep": server,
        "library": library,
        "growth_ratio": round(server["growth"] / library["growth"], 2),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="sequential runs on the thread")
    parser.add_argument("--rounds", type=int, default=1, help="repeat (a new thread each)")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "one_thread.json"))
    args = parser.parse_args()
    # graphkeep_server's knobs, as server_bench passes them: the server's defaults
    args.workers = args.pool_size = args.max_overflow = None
    args.extra_workers, args.worker_concurrency, args.replicas = 0, 4, 1
    tmp = Path(tempfile.mkdtemp(prefix="gk_one_thread_"))
    (tmp / "echo_graph.py").write_text(MESSAGES_GRAPH)
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"echo": "./echo_graph.py:graph"}})
    )
    builder = load_builder(tmp / "echo_graph.py")
    library_db = f"gk_lib_bench_{uuid.uuid4().hex[:8]}"
    await pg_database("create", library_db)
    rounds: list[dict[str, Any]] = []
    try:
        async with graphkeep_server(tmp, args) as (url, _database, _pid, _others):
            library_dsn = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{library_db}?sslmode=disable"
            for rnd in range(args.rounds):
                result = await one_round(url, library_dsn, builder, args.runs)
                progress(f"round {rnd + 1}/{args.rounds}: {json.dumps(result)}")
                rounds.append(result)
    finally:
        await pg_database("drop", library_db)
    summary = {
        side: {
            key: round(statistics.median(r[side][key] for r in rounds), 2)
            for key in ("first_p50_ms", "last_p50_ms", "growth")
        }
        for side in ("graphkeep", "library")
    }
    summary["growth_ratio"] = {
        "median": round(statistics.median(r["growth_ratio"] for r in rounds), 2)
    }
    save(Path(args.output), {"rounds": rounds, "median": summary})
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(asyncio.run(main()))

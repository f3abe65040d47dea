"""Run-engine benchmark: graphkeep on PostgreSQL vs the official `langgraph dev` server.

Both servers serve the same echo graph (one node that returns its input) over loopback HTTP:

- runs/wait            POST /runs/wait (stateless): p50 / p95 latency and throughput at
                       concurrency 1, 8 and 32
- thread runs/wait     a fresh thread per call (POST /threads), then POST /threads/{t}/runs/wait
                       on it (both timed), at concurrency 1, 8 and 32
- stream               POST /threads/{t}/runs/stream: time to the first event and to the last
- one thread           200 sequential runs/wait on one thread: median latency of the last 20
                       over the first 20 (must stay flat as the thread's history grows)

The official server comes from `langgraph-cli[inmem]`, installed by this script into its own
virtual environment under .bench-venvs/ (nothing is installed globally). Both servers run at
once and every step alternates between them (`--rounds N` repeats it, flipping the order), so
load from elsewhere on the machine hits both alike; the report gives medians over rounds and
ratios. Progress goes to stderr line by line; run it in the background with a log:

    nohup python bench/server_bench.py --rounds 3 > /tmp/gk/server_bench.log 2>&1 &
    python bench/server_bench.py --quick                           # fewer requests
    python bench/server_bench.py --measures wait --levels 32 --rounds 5   # one figure
    python bench/server_bench.py --skip-official
    python bench/server_bench.py --measures thread_wait --replicas 2 --against-one-process
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from benchkit import (
    ECHO_GRAPH,
    PG_ADMIN_DSN,
    ServerProbe,
    clean_env,
    free_port,
    langgraph_dev_server,
    pg_database,
    process,
    wait_ready,
)
from leanhttp import LeanClient

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY: tuple[int, ...] = (1, 8, 32)


# --------------------------------------------------------------------------- measurement


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
    }


async def timed_calls(
    call: Callable[[], Awaitable[None]], total: int, concurrency: int
) -> dict[str, float]:
    """`total` calls by `concurrency` concurrent clients: latency percentiles and runs/s."""
    remaining = total
    samples: list[float] = []

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {**summary(samples), "runs_per_s": round(total / elapsed, 1)}


PROBES: dict[str, list[dict[str, Any]]] = {}  # --probe: per target and step, per round
MEASURES: tuple[str, ...] = ("wait", "thread_wait", "stream", "one_thread")
ENCRYPTED = "graphkeep_pg_encrypted"
BASELINE = "graphkeep_baseline"
ONE_PROCESS_TARGET = "graphkeep_one_process"
# --against-one-process: the layout options at graphkeep's defaults (one `graphkeep serve`)
ONE_PROCESS = {
    "replicas": 1,
    "workers": None,
    "extra_workers": 0,
    "pool_size": None,
    "max_overflow": None,
}
BENCH_KEY = "base64:" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, bench only


def progress(message: str) -> None:
    """One line to stderr at once (the benchmark runs for minutes; say where it is)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Target:
    """One server under test: its HTTP client and the calls the measures make."""

    def __init__(
        self,
        name: str,
        url: str,
        database: str | None = None,
        pid: int | None = None,
        client: str = "lean",
        replicas: list[str] | None = None,
    ) -> None:
        self.name = name
        self.database = database  # graphkeep's own database and process (for --probe)
        self.pid = pid
        self.client = client
        self.replicas = replicas or []  # --replicas: the other processes' URLs
        self._connect(url)

    def _connect(self, url: str) -> None:
        self.url = url
        limits = httpx.Limits(max_connections=80, max_keepalive_connections=80)
        self.http = httpx.AsyncClient(base_url=url, timeout=120, limits=limits)
        # the runs/wait measures' client (leanhttp's docstring says why not httpx by default)
        self.lean = LeanClient(url) if self.client == "lean" else None
        # --replicas: the thread and runs/wait calls go round-robin over every process, as a
        # load balancer would spread them (any process serves any request)
        self._spread: list[Any] = [self.lean or self.http]
        for other in self.replicas:
            if self.client == "lean":
                self._spread.append(LeanClient(other))
            else:
                self._spread.append(httpx.AsyncClient(base_url=other, timeout=120, limits=limits))
        self._turn = itertools.cycle(self._spread)

    async def aclose(self) -> None:
        await self.http.aclose()
        for client in self._spread:
            if client is not self.http:
                await client.aclose()

    async def reopen(self, url: str) -> None:
        """Point this target at a restarted server (new clients, warmed up again)."""
        await self.aclose()
        self._connect(url)
        await self.warm_up()

    async def post_json(self, path: str, body: Any) -> Any:
        client = next(self._turn)
        if isinstance(client, LeanClient):
            return await client.post_json(path, body)
        r = await client.post(path, json=body)
        r.raise_for_status()
        return r.json()

    async def new_thread(self) -> str:
        return str((await self.post_json("/threads", {}))["thread_id"])

    async def wait_stateless(self) -> None:
        answer = await self.post_json(
            "/runs/wait", {"assistant_id": "echo", "input": {"text": "x"}}
        )
        assert answer == {"text": "x"}, answer

    def wait_on(self, tid: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            body = {"assistant_id": "echo", "input": {"text": "x"}}
            answer = await self.post_json(f"/threads/{tid}/runs/wait", body)
            assert answer == {"text": "x"}, answer

        return call

    async def wait_on_new_thread(self) -> None:
        await self.wait_on(await self.new_thread())()

    async def warm_up(self) -> None:
        for _ in range(10):  # graph import, connections
            await self.wait_stateless()

    async def measure(self, measure: str, concurrency: int, args: argparse.Namespace) -> Any:
        if measure in ("wait", "thread_wait"):
            if concurrency == 1:
                total = args.c1_requests
            else:
                total = max(args.requests, concurrency * 8)
            if measure == "wait":
                return await timed_calls(self.wait_stateless, total, concurrency)
            return await timed_calls(self.wait_on_new_thread, total, concurrency)
        if measure == "stream":
            return await self.stream(args.streams)
        if measure == "one_thread":
            return await self.one_thread(args.one_thread_runs)
        raise ValueError(measure)

    async def stream(self, count: int) -> dict[str, Any]:
        first_ms: list[float] = []
        last_ms: list[float] = []
        for _ in range(count):
            tid = await self.new_thread()
            body = {"assistant_id": "echo", "input": {"text": "s"}, "stream_mode": ["values"]}
            start = time.perf_counter()
            first: float | None = None
            async with self.http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as s:
                async for line in s.aiter_lines():
                    if line.startswith("event:") and first is None:
                        first = (time.perf_counter() - start) * 1000
            last_ms.append((time.perf_counter() - start) * 1000)
            assert first is not None
            first_ms.append(first)
        return {"first": summary(first_ms), "last": summary(last_ms)}

    async def one_thread(self, count: int) -> dict[str, float]:
        tid = await self.new_thread()
        samples: list[float] = []
        for i in range(count):
            start = time.perf_counter()
            r = await self.http.post(
                f"/threads/{tid}/runs/wait",
                json={"assistant_id": "echo", "input": {"text": str(i)}},
            )
            r.raise_for_status()
            samples.append((time.perf_counter() - start) * 1000)
        window = max(1, min(20, count // 4))
        first20 = statistics.median(samples[:window])
        last20 = statistics.median(samples[-window:])
        return {
            "first20_p50_ms": round(first20, 2),
            "last20_p50_ms": round(last20, 2),
            "ratio": round(last20 / first20, 2),
        }


def steps(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(measure, concurrency) pairs in the order they run."""
    out: list[tuple[str, int]] = []
    for measure in args.measures:
        if measure in ("wait", "thread_wait"):
            out += [(measure, c) for c in CONCURRENCY]
        else:
            out.append((measure, 0))
    return out


def step_key(measure: str, concurrency: int) -> str:
    return f"{measure}_c{concurrency}" if concurrency else measure


async def bench_interleaved(
    targets: list[Target],
    args: argparse.Namespace,
    restart: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Every step on every target in turn, `rounds` times (the order flips each round), so a
    load spike from elsewhere on the machine hits both servers alike. `restart`, if given,
    restarts one target's server before every round after the first (`--fresh-official`)."""
    for t in targets:
        await t.warm_up()
    results: dict[str, dict[str, list[Any]]] = {t.name: {} for t in targets}
    plan = steps(args)
    for rnd in range(args.rounds):
        if restart is not None and rnd > 0:
            await restart()
        order = targets if rnd % 2 == 0 else targets[::-1]
        for measure, concurrency in plan:
            key = step_key(measure, concurrency)
            for t in order:
                started = time.perf_counter()
                if args.probe and t.database is not None:
                    async with ServerProbe(t.url, t.database, t.pid) as probe:
                        value = await t.measure(measure, concurrency, args)
                    PROBES.setdefault(f"{t.name} {key}", []).append(probe.report())
                    progress(f"probe {key} {t.name}: {json.dumps(probe.report())}")
                else:
                    value = await t.measure(measure, concurrency, args)
                results[t.name].setdefault(key, []).append(value)
                progress(
                    f"round {rnd + 1}/{args.rounds} {key:<14} {t.name:<14} "
                    f"{json.dumps(value)} ({time.perf_counter() - started:.1f} s)"
                )
    return results


# --------------------------------------------------------------------------- servers


@asynccontextmanager
async def graphkeep_server(
    tmp: Path, args: argparse.Namespace, encryption_key: str | None = None, root: Path = ROOT
) -> AsyncIterator[tuple[str, str, int, list[str]]]:
    """`graphkeep serve` on a throwaway PostgreSQL database; yields its URL, database and pid,
    and the URLs of the other `serve` processes on that database (`--replicas`)."""
    name = f"gk_srv_bench_{uuid.uuid4().hex[:8]}"
    extra = {"GRAPHKEEP_ENCRYPTION_KEY": encryption_key} if encryption_key else {}
    await pg_database("create", name)
    db_url = PG_ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
    # The server's own defaults unless told otherwise: more worker tasks than the default
    # made this CPU-bound event loop slower, not faster (2 cores, c=8 / c=32 runs/s, same
    # session: workers 4, pool 10 + 10: 146 / 144; workers 8, 16 + 4: 135 / 127; workers 32,
    # 48 + 16: 108 / 104).
    for variable, value in (  # not `name`: that is the database the finally drops
        ("GRAPHKEEP_WORKERS", args.workers),
        ("GRAPHKEEP_DB_POOL_SIZE", args.pool_size),
        ("GRAPHKEEP_DB_MAX_OVERFLOW", args.max_overflow),
    ):
        if value is not None:
            extra[variable] = str(value)
    env = clean_env(GRAPHKEEP_DATABASE_URL=db_url, GRAPHKEEP_LOG_LEVEL="WARNING", **extra)
    try:
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "app.cli", "migrate"],
            env=env,
            cwd=root,
            check=True,
            capture_output=True,
        )

        def serve(port: int) -> list[str]:
            config = ["--config", str(tmp / "langgraph.json")]
            return [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *config]

        port = free_port()
        cmd = serve(port)
        with ExitStack() as stack:
            # Optional `graphkeep worker` processes beside the API (API and workers scale
            # apart): runs the API process has no free slot for go to them.
            for i in range(args.extra_workers):
                worker_cmd = [sys.executable, "-m", "app.cli", "worker"]
                worker_cmd += ["--config", str(tmp / "langgraph.json")]
                worker_cmd += ["--concurrency", str(args.worker_concurrency)]
                worker_env = {**env, "GRAPHKEEP_WORKERS": str(args.worker_concurrency)}
                stack.enter_context(process(worker_cmd, worker_env, tmp / f"worker{i}.log", root))
            log = tmp / f"graphkeep-{name}.log"
            proc = stack.enter_context(process(cmd, env, log, root))
            url = f"http://127.0.0.1:{port}"
            # Optional more `graphkeep serve` processes on the same database (replicas behind
            # a load balancer, here on one host): each with its API and in-process workers.
            others: list[str] = []
            for i in range(1, args.replicas):
                other_port = free_port()
                other_log = tmp / f"graphkeep-{name}-replica{i}.log"
                other = stack.enter_context(process(serve(other_port), env, other_log, root))
                others.append(f"http://127.0.0.1:{other_port}")
                await wait_ready(others[-1], other, other_log)
            await wait_ready(url, proc, log)
            progress(f"graphkeep ready at {url} (pid {proc.pid}, database {name}) {others}")
            yield url, name, proc.pid, others
    finally:
        await pg_database("drop", name)


def source_tree(path: str) -> Path | None:
    return Path(path).absolute() if path else None


def save(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def medians(rounds: dict[str, list[Any]]) -> dict[str, dict[str, float]]:
    """Per step, the median over rounds of each figure (stream: first_/last_ prefixed)."""
    out: dict[str, dict[str, float]] = {}
    for key, values in rounds.items():
        flat: list[dict[str, float]] = []
        for v in values:
            if key == "stream":
                flat.append(
                    {f"{part}_{k}": x for part in ("first", "last") for k, x in v[part].items()}
                )
            else:
                flat.append(v)
        out[key] = {k: _median([f[k] for f in flat]) for k in flat[0]}
    return out


def report(summary_: dict[str, dict[str, dict[str, float]]]) -> str:
    """Medians over rounds, graphkeep beside langgraph dev, with the ratio of the figure that
    matters per row (throughput: graphkeep / official, higher is better; latency: official /
    graphkeep, so also higher is better)."""
    gk, off = summary_.get("graphkeep_pg", {}), summary_.get("langgraph_dev", {})
    mine, other = "graphkeep (PG)", "langgraph dev"
    if ENCRYPTED in summary_:  # --encryption: the same server with a key, beside it
        gk, off = summary_[ENCRYPTED], summary_.get("graphkeep_pg", {})
        mine, other = "with key", "no key"
    if BASELINE in summary_:  # --baseline-tree: this tree beside another
        off, other = summary_[BASELINE], "baseline tree"
    if ONE_PROCESS_TARGET in summary_:  # --against-one-process: this layout beside one process
        off, other = summary_[ONE_PROCESS_TARGET], "one process"
    lines = [
        f"{'measure':<36}{mine:>24}  {other:>24}  {'ratio':>16}",
    ]

    def cell(d: dict[str, float] | None, keys: tuple[str, ...]) -> str:
        if not d:
            return "-"
        return " / ".join(f"{d[k]}" for k in keys)

    def ratio(key: str, field: str, higher_is_better: bool) -> str:
        a, b = gk.get(key, {}).get(field), off.get(key, {}).get(field)
        if not a or not b:
            return "-"
        value = a / b if higher_is_better else b / a
        return f"{value:.2f}x {'runs/s' if higher_is_better else 'faster'}"

    for key, d in gk.items():
        if key.startswith(("wait_c", "thread_wait_c")):
            label = key.replace("_c", " c=").replace("_", " ")
            keys: tuple[str, ...] = ("p50_ms", "p95_ms", "runs_per_s")
            lines.append(
                f"{label + ' p50/p95 ms, runs/s':<36}{cell(d, keys):>24}  "
                f"{cell(off.get(key), keys):>24}  {ratio(key, 'runs_per_s', True):>16}"
            )
        elif key == "stream":
            for part in ("first", "last"):
                keys = (f"{part}_p50_ms", f"{part}_p95_ms")
                lines.append(
                    f"{'stream ' + part + ' event p50/p95 ms':<36}{cell(d, keys):>24}  "
                    f"{cell(off.get(key), keys):>24}  {ratio(key, part + '_p50_ms', False):>16}"
                )
        elif key == "one_thread":
            keys = ("first20_p50_ms", "last20_p50_ms", "ratio")
            lines.append(
                f"{'one thread first20/last20 ms, ratio':<36}{cell(d, keys):>24}  "
                f"{cell(off.get(key), keys):>24}  {'':>16}"
            )
    return "\n".join(lines)


def round_by_round(rounds: dict[str, dict[str, list[Any]]]) -> str:
    """runs/s of each round, side by side: a server whose rate drifts as rounds go on shows
    it here, not in the medians (the official dev server's fell round after round in our
    runs, 163 -> 80 runs/s at c=32 over five; graphkeep's did not). The first round is each
    server on an empty database."""
    names = list(rounds)
    lines = []
    for key in rounds[names[0]]:
        if not key.startswith(("wait_c", "thread_wait_c")):
            continue
        series = [[r["runs_per_s"] for r in rounds[name].get(key, [])] for name in names]
        lines.append(
            f"{key} runs/s by round: "
            + "; ".join(f"{name} {series[i]}" for i, name in enumerate(names))
        )
        if len(series) == 2 and all(series):
            ratios = [round(a / b, 2) for a, b in zip(series[0], series[1], strict=False) if b]
            lines.append(f"{key} ratio by round ({names[0]} / {names[1]}): {ratios}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="runs per level (c > 1)")
    parser.add_argument(
        "--c1-requests",
        type=int,
        default=40,
        help="runs at concurrency 1 (langgraph dev takes ~1 s each)",
    )
    parser.add_argument("--streams", type=int, default=20, help="streamed runs per round")
    parser.add_argument(
        "--one-thread-runs", type=int, default=200, help="sequential runs on one thread"
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeat every step (medians)")
    parser.add_argument(
        "--measures",
        default=",".join(MEASURES),
        help=f"comma-separated subset of {','.join(MEASURES)}",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="graphkeep in-process workers (its default)"
    )
    parser.add_argument("--pool-size", type=int, default=None, help="graphkeep DB pool")
    parser.add_argument("--max-overflow", type=int, default=None, help="graphkeep DB overflow")
    parser.add_argument(
        "--extra-workers", type=int, default=0, help="`graphkeep worker` processes to add"
    )
    parser.add_argument("--worker-concurrency", type=int, default=32)
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="`graphkeep serve` processes on the one database (each with its workers); the "
        "runs/wait measures spread their calls round-robin over them",
    )
    parser.add_argument(
        "--against-one-process",
        action="store_true",
        help="compare graphkeep in the layout the options above give (--replicas, --workers, "
        "--extra-workers) with graphkeep as one `graphkeep serve` at its defaults, instead of "
        "the official server",
    )
    parser.add_argument(
        "--quick", action="store_true", help="60 runs per level, 20 at c=1, 60 on one thread"
    )
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument(
        "--official-memory-only",
        action="store_true",
        help="run langgraph dev without its periodic file persistence (it pickles all its "
        "threads, runs and checkpoints to disk every 10 s; it still does on exit)",
    )
    parser.add_argument(
        "--fresh-official",
        action="store_true",
        help="restart langgraph dev before every round with nothing kept (no file persistence, "
        "its .langgraph_api pickles removed): each round then measures a fresh official server "
        "(its in-memory runtime slows as it holds more runs)",
    )
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="HTTP client of the runs/wait measures (both servers get the same one)",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="sample where graphkeep's time goes in each step (pg_stat_activity, GET /ok "
        "latency, /metrics means); reported under `probe`",
    )
    parser.add_argument(
        "--encryption",
        action="store_true",
        help="compare graphkeep with GRAPHKEEP_ENCRYPTION_KEY against graphkeep without one "
        "(instead of the official server)",
    )
    parser.add_argument(
        "--baseline-tree",
        default="",
        help="compare graphkeep with the graphkeep of another source tree (e.g. `git archive "
        "<commit> | tar -x -C DIR`; run from this venv, its own `app` package first on the "
        "path) instead of the official server",
    )
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "server_bench.json"))
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels, comma-separated")
    args = parser.parse_args()
    global CONCURRENCY
    CONCURRENCY = tuple(int(x) for x in args.levels.split(","))
    args.measures = [m for m in args.measures.split(",") if m]
    if unknown := sorted(set(args.measures) - set(MEASURES)):
        parser.error(f"unknown measures: {', '.join(unknown)}")
    if args.quick:
        args.requests, args.c1_requests, args.one_thread_runs = 60, 20, 60
    tmp = Path(tempfile.mkdtemp(prefix="gk_server_bench_"))
    (tmp / "echo_graph.py").write_text(ECHO_GRAPH)
    (tmp / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"echo": "./echo_graph.py:graph"}})
    )
    results: dict[str, Any] = {"args": dict(vars(args))}
    baseline_root = source_tree(args.baseline_tree)
    restart: Callable[[], Awaitable[None]] | None = None
    async with AsyncExitStack() as stack:
        url, database, pid, others = await stack.enter_async_context(graphkeep_server(tmp, args))
        targets = [Target("graphkeep_pg", url, database, pid, args.client, others)]
        if baseline_root is not None:
            url, database, pid, others = await stack.enter_async_context(
                graphkeep_server(tmp, args, root=baseline_root)
            )
            targets.append(Target(BASELINE, url, database, pid, args.client, others))
        elif args.encryption:
            url, database, pid, others = await stack.enter_async_context(
                graphkeep_server(tmp, args, BENCH_KEY)
            )
            targets.append(Target(ENCRYPTED, url, database, pid, args.client, others))
        elif args.against_one_process:
            one = argparse.Namespace(**{**vars(args), **ONE_PROCESS})
            url, database, pid, _ = await stack.enter_async_context(graphkeep_server(tmp, one))
            targets.append(Target(ONE_PROCESS_TARGET, url, database, pid, args.client))
        elif not args.skip_official:
            official = AsyncExitStack()
            stack.push_async_callback(official.aclose)
            keep = not (args.official_memory_only or args.fresh_official)
            try:
                url = await official.enter_async_context(
                    langgraph_dev_server(tmp, progress, file_persistence=keep)
                )
                targets.append(Target("langgraph_dev", url, client=args.client))
            except RuntimeError as exc:
                results["langgraph_dev_error"] = str(exc)[-2000:]
                progress(f"official server unavailable: {exc}")
            if args.fresh_official and len(targets) == 2:

                async def restart_official() -> None:
                    await official.aclose()
                    # it pickles its runs and checkpoints here on the way out, even without
                    # file persistence, and a restart would load them all back
                    shutil.rmtree(tmp / ".langgraph_api", ignore_errors=True)
                    fresh = await official.enter_async_context(
                        langgraph_dev_server(tmp, progress, file_persistence=False)
                    )
                    await targets[1].reopen(fresh)

                restart = restart_official
        for t in targets:
            stack.push_async_callback(t.aclose)
        rounds = await bench_interleaved(targets, args, restart)
    results["rounds"] = rounds
    if PROBES:
        results["probe"] = PROBES
    results["median"] = {name: medians(r) for name, r in rounds.items()}
    save(Path(args.output), results)
    print(json.dumps(results["median"], indent=2))
    print(report(results["median"]))
    print(round_by_round(rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

"""Shared plumbing for the server benchmarks: free ports, clean environments, the official
`langgraph dev` server in its own venv, subprocess lifetimes and throwaway PostgreSQL databases.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench-venvs" / "langgraph-dev"
PG_ADMIN_DSN = os.environ.get("BENCH_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


# The one-node graph the run and protocol benchmarks serve on both servers (written to a
# file of its own and named in a langgraph.json).
ECHO_GRAPH = """
from typing import Any, TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict, total=False):
    text: str


def echo(state: State) -> dict[str, Any]:
    return {"text": state.get("text", "")}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
graph = builder.compile()
"""


# app/examples/chat.py (the `agent` example: a fake chat model that streams its reply one
# chunk per word and space) in one self-contained file, so the official server's venv, which
# cannot import `app`, serves the very same graph.
CHAT_GRAPH = """
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph


async def respond(state, config):
    text = next((m.text for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), "")
    reply = f"You said: {text}" if text else "Hello! Say something."
    model = GenericFakeChatModel(messages=iter([AIMessage(content=reply)]))
    message = await model.ainvoke(state["messages"], config)
    return {"messages": [AIMessage(content=message.text, id=message.id)]}


builder = StateGraph(MessagesState)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
graph = builder.compile()
"""


def rss_mb(pid: int) -> float:
    """Resident memory of one process, MB (both servers run as a single process)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GRAPHKEEP_", "LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_"))
    }
    env.update(extra)
    return env


def install_langgraph_dev() -> Path:
    """A venv with langgraph-cli[inmem]; returns its `langgraph` executable."""
    exe = VENV / "bin" / "langgraph"
    if exe.exists():
        return exe
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = subprocess.run([*pip, "langgraph-cli[inmem]"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"installing langgraph-cli[inmem] failed:\n{done.stderr[-3000:]}")
    return exe


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, path: str = "/ok") -> None:
    """Poll `url + path` until it answers 200; fail early if the process exits."""
    deadline = time.monotonic() + 180
    async with httpx.AsyncClient() as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited:\n{tail(log)}")
            try:
                if (await client.get(url + path, timeout=2)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{tail(log)}")
            await asyncio.sleep(0.3)


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> Iterator[Any]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


async def pg_database(action: str, name: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        if action == "create":
            await conn.execute(f'CREATE DATABASE "{name}"')
        else:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@asynccontextmanager
async def langgraph_dev_server(
    tmp: Path, say: Callable[[str], None] = lambda _message: None, *, file_persistence: bool = True
) -> AsyncIterator[str]:
    """The official `langgraph dev` (in-memory) from its own venv on a free loopback port,
    serving `tmp/langgraph.json`; yields its URL. `file_persistence=False` turns off its
    pickling of all its data to disk every 10 s (LANGGRAPH_DISABLE_FILE_PERSISTENCE); it still
    pickles it to `tmp/.langgraph_api` on exit and loads it back on start."""
    async with langgraph_dev_process(tmp, say, file_persistence=file_persistence) as (url, _):
        yield url


@asynccontextmanager
async def langgraph_dev_process(
    tmp: Path, say: Callable[[str], None] = lambda _message: None, *, file_persistence: bool = True
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """As langgraph_dev_server, yielding the process too (its pid: RSS, CPU time)."""
    say("installing / finding langgraph-cli[inmem] in .bench-venvs/")
    exe = await asyncio.to_thread(install_langgraph_dev)
    port = free_port()
    env = clean_env(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false")
    if not file_persistence:
        env["LANGGRAPH_DISABLE_FILE_PERSISTENCE"] = "true"
    cmd = [str(exe), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser"]
    cmd += ["--no-reload", "--config", str(tmp / "langgraph.json")]
    with process(cmd, env, tmp / "langgraph-dev.log", tmp) as proc:
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url, proc, tmp / "langgraph-dev.log")
        say(f"langgraph dev ready at {url} (pid {proc.pid})")
        yield url, proc


# --------------------------------------------------------------------------- child processes


class BenchChild:
    """A bench running in its own process (another tree's code), asked one JSON line at a
    time: `ask` writes a command and returns the next JSON line the child prints; other
    lines are the child's own output, echoed when `echo`."""

    def __init__(self, script: Path, args: list[str], tree: Path, pythonpath: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": pythonpath},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, cmd: dict[str, Any], *, echo: bool = False) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("child exited")
            if line.startswith("{"):
                return dict(json.loads(line))
            if echo:
                print(line, end="")

    def close(self) -> None:
        """End the child (its databases go with it); one that died already is only reaped."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- where time goes


def _histograms(text: str, names: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """(sum, count) per histogram series of `names` in a Prometheus text page, keyed by the
    metric name plus its labels as written."""
    out: dict[str, tuple[float, float]] = {}
    for line in text.splitlines():
        for name in names:
            for suffix in ("_sum", "_count"):
                if line.startswith(name + suffix):
                    series, _, value = line.rpartition(" ")
                    key = name + series[len(name + suffix) :]
                    total, count = out.get(key, (0.0, 0.0))
                    if suffix == "_sum":
                        total = float(value)
                    else:
                        count = float(value)
                    out[key] = (total, count)
    return out


PROBED_HISTOGRAMS = (
    "graphkeep_http_request_duration_seconds",
    "graphkeep_run_queue_wait_seconds",
    "graphkeep_run_duration_seconds",
)


class ServerProbe:
    """Samples, while a step runs, where a graphkeep server's time goes: its database
    sessions (pg_stat_activity: active, idle in transaction, wait events), the event-loop
    lag seen from outside (GET /ok latency every 50 ms) and, from /metrics, the mean time
    per request route, in the queue and executing."""

    def __init__(self, url: str, database: str, pid: int | None = None) -> None:
        self.url = url
        self.database = database
        self.pid = pid  # the server process: its CPU time per run
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self.samples = 0
        self.sessions: dict[str, int] = {}
        self.ok_ms: list[float] = []
        self._before: dict[str, tuple[float, float]] = {}

    async def _scrape(self, client: httpx.AsyncClient) -> dict[str, tuple[float, float]]:
        return _histograms((await client.get(self.url + "/metrics")).text, PROBED_HISTOGRAMS)

    async def _sample_pg(self) -> None:
        conn = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            while not self._stop.is_set():
                rows = await conn.fetch(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE datname = $1 AND pid <> pg_backend_pid()",
                    self.database,
                )
                self.samples += 1
                for r in rows:
                    key = f"{r['state']}|{r['wait_event_type'] or '-'}:{r['wait_event'] or '-'}"
                    self.sessions[key] = self.sessions.get(key, 0) + 1
                await asyncio.sleep(0.02)
        finally:
            await conn.close()

    async def _ping(self, client: httpx.AsyncClient) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            await client.get(self.url + "/ok")
            self.ok_ms.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.05)

    def _cpu_s(self) -> float:
        if self.pid is None:
            return 0.0
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def _commits(self) -> int:
        conn = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            value = await conn.fetchval(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", self.database
            )
            return int(value or 0)
        finally:
            await conn.close()

    async def __aenter__(self) -> ServerProbe:
        self._client = httpx.AsyncClient(timeout=30)
        self._before = await self._scrape(self._client)
        self._cpu0 = self._cpu_s()
        self._commits0 = await self._commits()
        self._tasks = [
            asyncio.create_task(self._sample_pg()),
            asyncio.create_task(self._ping(self._client)),
        ]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        cpu = self._cpu_s() - self._cpu0
        await asyncio.sleep(0.6)  # pg_stat_database lags its backends by up to 500 ms
        commits = await self._commits() - self._commits0
        after = await self._scrape(self._client)
        await self._client.aclose()
        self.means_ms: dict[str, float] = {}
        for key, (total, count) in after.items():
            t0, c0 = self._before.get(key, (0.0, 0.0))
            if count - c0 > 0:
                self.means_ms[key] = round((total - t0) / (count - c0) * 1000, 2)
            if key.startswith("graphkeep_run_duration_seconds"):
                self.runs = int(count - c0)
        runs = max(1, getattr(self, "runs", 0))
        self.per_run = {
            "server_cpu_ms": round(cpu * 1000 / runs, 2),
            "db_commits": round(commits / runs, 2),
        }

    def report(self) -> dict[str, Any]:
        n = max(1, self.samples)
        ok = sorted(self.ok_ms) or [0.0]
        return {
            "pg_sessions_avg": {
                k: round(v / n, 2) for k, v in sorted(self.sessions.items(), key=lambda kv: -kv[1])
            },
            "ok_ms_p50": round(ok[len(ok) // 2], 2),
            "ok_ms_p95": round(ok[max(0, int(len(ok) * 0.95) - 1)], 2),
            "metric_means_ms": getattr(self, "means_ms", {}),
            "per_run": getattr(self, "per_run", {}),
        }

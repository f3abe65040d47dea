"""Shared plumbing for the server benchmarks: free ports, clean environments, the official
`langgraph dev` server in its own venv, subprocess lifetimes and throwaway PostgreSQL databases.
"""

from __future__ import annotations

import asyncio
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
    tmp: Path, say: Callable[[str], None] = lambda _message: None
) -> AsyncIterator[str]:
    """The official `langgraph dev` (in-memory) from its own venv on a free loopback port,
    serving `tmp/langgraph.json`; yields its URL."""
    say("installing / finding langgraph-cli[inmem] in .bench-venvs/")
    exe = await asyncio.to_thread(install_langgraph_dev)
    port = free_port()
    env = clean_env(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false")
    cmd = [str(exe), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser"]
    cmd += ["--no-reload", "--config", str(tmp / "langgraph.json")]
    with process(cmd, env, tmp / "langgraph-dev.log", tmp) as proc:
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url, proc, tmp / "langgraph-dev.log")
        say(f"langgraph dev ready at {url} (pid {proc.pid})")
        yield url

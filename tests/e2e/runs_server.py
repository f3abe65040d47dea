"""Live `graphkeep serve` / `graphkeep worker` processes for the run-engine e2e tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
GRAPHS_CONFIG = ROOT / "tests" / "graphs" / "langgraph.json"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(db_url: str, record_file: Path | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
    env.update(
        {
            "GRAPHKEEP_DATABASE_URL": db_url,
            "GRAPHKEEP_CONFIG_FILE": str(GRAPHS_CONFIG),
            "GRAPHKEEP_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_API_KEY"):
        env.pop(key, None)
    if record_file is not None:
        env["GK_TEST_RECORD_FILE"] = str(record_file)
    env.update(extra or {})
    return env


def wait_for_ok(
    popen: subprocess.Popen[bytes], ok_url: str, output: Callable[[], str], timeout: float = 60
) -> None:
    """Poll `ok_url` until it answers 200; fail with the process output if it dies or stalls."""
    deadline = time.monotonic() + timeout
    while True:
        if popen.poll() is not None:
            raise RuntimeError(f"server exited early:\n{output()}")
        try:
            if httpx.get(ok_url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server did not start:\n{output()}")
        time.sleep(0.1)


class Proc:
    def __init__(self, popen: subprocess.Popen[bytes], url: str | None, log: Path) -> None:
        self.popen = popen
        self.url = url
        self.log = log

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    fh = log.open("ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    finally:
        fh.close()


@contextmanager
def serve(
    db_url: str,
    tmp: Path,
    *,
    workers: int = 2,
    record_file: Path | None = None,
    env: dict[str, str] | None = None,
    name: str = "serve",
) -> Iterator[Proc]:
    """`graphkeep serve` on a free loopback port; yields once /ok answers."""
    port = free_port()
    log = tmp / f"{name}-{port}.log"
    full_env = _env(db_url, record_file, env)
    full_env["GRAPHKEEP_WORKERS"] = str(workers)
    popen = _start(["serve", "--host", "127.0.0.1", "--port", str(port)], full_env, log)
    proc = Proc(popen, f"http://127.0.0.1:{port}", log)
    try:
        wait_for_ok(popen, f"{proc.url}/ok", proc.output)
        yield proc
    finally:
        proc.kill()


@contextmanager
def worker(
    db_url: str,
    tmp: Path,
    *,
    concurrency: int = 2,
    record_file: Path | None = None,
    env: dict[str, str] | None = None,
    name: str = "worker",
) -> Iterator[Proc]:
    """`graphkeep worker` (no API)."""
    log = tmp / f"{name}-{time.monotonic_ns()}.log"
    popen = _start(
        ["worker", "--concurrency", str(concurrency)], _env(db_url, record_file, env), log
    )
    proc = Proc(popen, None, log)
    try:
        deadline = time.monotonic() + 60
        while "worker ready" not in proc.output():
            if popen.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{proc.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{proc.output()}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()

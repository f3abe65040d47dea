"""`graphkeep serve` as a subprocess on a free loopback port, for the API e2e tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import create_pg_database, drop_pg_database
from tests.e2e.runs_server import free_port, wait_for_ok

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "clean_env", "free_port", "graphkeep", "serve"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without GRAPHKEEP_* and the API-key variables the SDK would send."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GRAPHKEEP_")
        and k not in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_API_KEY")
    }
    env.update(PYTHONUNBUFFERED="1", GRAPHKEEP_LOG_LEVEL="WARNING", **extra)
    return env


def graphkeep(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def serve(db_url: str, log: Path, *args: str, workers: int = 1) -> Iterator[str]:
    """Start `graphkeep serve`, yield its base URL once /ok answers, kill it afterwards."""
    port = free_port()
    env = clean_env(GRAPHKEEP_DATABASE_URL=db_url, GRAPHKEEP_WORKERS=str(workers))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"  # --host defaults to 127.0.0.1
    try:
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        yield url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@contextmanager
def serve_on_new_pg_database(prefix: str, log: Path, *args: str) -> Iterator[str]:
    """`graphkeep serve` on a new PostgreSQL database migrated by `graphkeep migrate` (the
    server refuses a schema that is behind); the database is dropped afterwards."""
    db_url = create_pg_database(prefix)
    try:
        done = graphkeep("migrate", env=clean_env(GRAPHKEEP_DATABASE_URL=db_url))
        assert done.returncode == 0, done.stderr
        with serve(db_url, log, *args) as url:
            yield url
    finally:
        drop_pg_database(db_url)

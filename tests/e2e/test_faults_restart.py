"""A killed process's runs resume without waiting for their lease, with real processes.

- SQLite (the embedded default): kill -9 the single `graphkeep serve` mid-run and start it
  again on the same file: the restarted process reclaims its dead predecessor's run at once
  (the default 30 s lease would otherwise hold it), and the finished node does not run again.
- PostgreSQL: kill -9 a `graphkeep worker`: its liveness lock goes with its session and
  another worker's reaper reclaims the run at once (a 30 s lease here too).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.conftest import _migrate, create_pg_database, drop_pg_database
from tests.e2e.runs_fixtures import read_records
from tests.e2e.runs_server import serve, worker
from tests.e2e.test_faults_workers import _until, _worker_pid

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE = "30"  # the default: recovery must not wait for it
RESUMED_WITHIN = 8.0  # seconds after the restart / kill (start-up on a loaded 2-core box)


async def _inside_b(client: Any, thread_id: str, timeout: float = 20.0) -> None:
    """Until the checkpoint after `a` is durable (the thread's next node is `b`): node `a`
    records itself before its writes commit, and a kill in between rightly runs `a` again."""
    deadline = time.monotonic() + timeout
    while (await client.threads.get_state(thread_id))["next"] != ["b"]:
        assert time.monotonic() < deadline, "the checkpoint after `a` never appeared"
        await asyncio.sleep(0.05)


async def test_restarted_sqlite_server_resumes_its_dead_predecessors_run(tmp_path: Path) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"
    record = tmp_path / "record.txt"
    env = {"GRAPHKEEP_LEASE_SECONDS": LEASE}
    tag = f"r-{uuid.uuid4().hex[:6]}"
    with serve(db_url, tmp_path, workers=2, record_file=record, env=env, name="first") as first:
        client = get_client(url=first.url)
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(tid, "steps", input={"tag": tag, "sleep": 1.0})
        await _until(lambda: [n for n, _ in read_records(record, tag)] == ["a"])
        await _inside_b(client, tid)
        first.kill()
        old_pid = first.popen.pid
    with serve(db_url, tmp_path, workers=2, record_file=record, env=env, name="second") as again:
        restarted = time.monotonic()
        client = get_client(url=again.url)
        await _until(
            lambda: [n for n, _ in read_records(record, tag)] == ["a", "b", "c"],
            timeout=RESUMED_WITHIN + 1.0,
        )
        assert time.monotonic() - restarted < RESUMED_WITHIN
        out = await client.runs.join(tid, run["run_id"])
        assert out["trail"] == ["a", "b", "c"], out
        got = await client.runs.get(tid, run["run_id"])
        assert got["status"] == "success"
        recs = read_records(record, tag)
        assert recs[0][1] == old_pid and all(p == again.popen.pid for _, p in recs[1:]), recs


@pytest.mark.postgres
async def test_killed_workers_run_is_reclaimed_without_waiting_for_the_lease(
    tmp_path: Path,
) -> None:
    if os.environ.get("GRAPHKEEP_TEST_SKIP_POSTGRES") == "1":
        pytest.skip("GRAPHKEEP_TEST_SKIP_POSTGRES=1")
    db_url = await asyncio.to_thread(create_pg_database, "gk_reclaim")
    await _migrate(db_url)
    record = tmp_path / "record.txt"
    env = {"GRAPHKEEP_LEASE_SECONDS": LEASE}
    try:
        with (
            serve(db_url, tmp_path, workers=0, env=env, name="api") as api,
            worker(db_url, tmp_path, record_file=record, env=env, name="w1") as w1,
            worker(db_url, tmp_path, record_file=record, env=env, name="w2") as w2,
        ):
            client = get_client(url=api.url)
            tag = f"k-{uuid.uuid4().hex[:6]}"
            tid = (await client.threads.create())["thread_id"]
            run = await client.runs.create(tid, "steps", input={"tag": tag, "sleep": 4.0})
            pid = await _worker_pid(db_url, run["run_id"])
            victim, other = (w1, w2) if pid == w1.popen.pid else (w2, w1)
            await _until(lambda: [n for n, _ in read_records(record, tag)] == ["a"])
            await _inside_b(client, tid)
            victim.kill()  # inside "b"
            killed = time.monotonic()
            taken = await _worker_pid(db_url, run["run_id"], not_pid=pid, timeout=10)
            assert taken == other.popen.pid
            assert time.monotonic() - killed < 5.0  # not the 30 s lease
            out = await client.runs.join(tid, run["run_id"])
            assert out["trail"] == ["a", "b", "c"], out
            recs = read_records(record, tag)
            assert recs == [("a", pid), ("b", taken), ("c", taken)], recs
    finally:
        await asyncio.to_thread(drop_pg_database, db_url)

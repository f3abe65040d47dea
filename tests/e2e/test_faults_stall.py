"""A worker that stalls past its lease (SIGSTOP, then SIGCONT) never writes again: real
processes on PostgreSQL (an API process without workers, two `graphkeep worker`s).

Another worker recovers the run after the lease and finishes it; the stale worker wakes up
in the middle of its node, and its writes (pending writes, checkpoint, events, renewal) are
refused: the thread's newest checkpoint stays the run's last, the run stays `success`, the
stale attempt runs no further node, and it logs one WARNING naming both attempts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from langgraph_sdk import get_client

from app.db.engine import create_engine
from tests.conftest import _migrate, create_pg_database, drop_pg_database
from tests.e2e.runs_fixtures import read_records
from tests.e2e.runs_server import serve
from tests.e2e.test_faults_workers import Cluster, _until, _worker_pid

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow]

LEASE = 2.0
WARNING = "run attempt superseded"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.environ.get("GRAPHKEEP_TEST_SKIP_POSTGRES") == "1":
        pytest.skip("GRAPHKEEP_TEST_SKIP_POSTGRES=1")
    tmp_path = tmp_path_factory.mktemp("stall")
    db_url = create_pg_database("gk_stall")
    asyncio.run(_migrate(db_url))
    env = {"GRAPHKEEP_LEASE_SECONDS": str(LEASE), "GRAPHKEEP_DRAIN_TIMEOUT_SECONDS": "5"}
    try:
        with ExitStack() as stack:
            api = stack.enter_context(serve(db_url, tmp_path, workers=0, env=env, name="api"))
            assert api.url is not None
            c = Cluster(api.url, db_url, tmp_path, tmp_path / "record.txt", stack, env=env)
            c.add_worker()
            c.add_worker()
            yield c
    finally:
        drop_pg_database(db_url)


async def _newest_checkpoint(db_url: str, thread_id: str) -> Any:
    from sqlalchemy import select

    from app.db.tables import checkpoints

    engine = create_engine(db_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return (
                await conn.execute(
                    select(checkpoints.c.run_id, checkpoints.c.metadata)
                    .where(checkpoints.c.thread_id == thread_id, checkpoints.c.checkpoint_ns == "")
                    .order_by(checkpoints.c.checkpoint_id.desc())
                    .limit(1)
                )
            ).one()
    finally:
        await engine.dispose()


async def _stall_and_check(
    cluster: Cluster,
    graph: str,
    payload: dict[str, Any],
    *,
    after: list[str],
    stalled_in: str,
    final: list[str],
) -> None:
    client = get_client(url=cluster.url)
    tag = f"s-{uuid.uuid4().hex[:6]}"
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, graph, input={"tag": tag, **payload}, stream_resumable=True)
    pid = await _worker_pid(cluster.db_url, run["run_id"])
    await _until(lambda: [n for n, _ in read_records(cluster.record, tag)] == after)
    await asyncio.sleep(0.3)  # inside the sleeping node
    victim = cluster.by_pid(pid)
    warnings_before = victim.output().count(WARNING)
    os.kill(pid, signal.SIGSTOP)
    try:
        await _worker_pid(cluster.db_url, run["run_id"], not_pid=pid, timeout=LEASE + 10)
        out = await client.runs.join(tid, run["run_id"])
        assert sorted(out["done" if graph == "fan" else "trail"]) == sorted(final), out
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"
        before = await _newest_checkpoint(cluster.db_url, tid)
        state = await client.threads.get_state(tid)
        assert state["next"] == []
    finally:
        os.kill(pid, signal.SIGCONT)
    # The stale worker wakes in its node: it finishes it, and every write it tries is refused.
    deadline = time.monotonic() + 15
    while victim.output().count(WARNING) == warnings_before:
        assert time.monotonic() < deadline, victim.output()[-3000:]
        await asyncio.sleep(0.1)
    await asyncio.sleep(payload.get("sleep", 0.5) + 1.0)  # time for any write it would make
    after_state = await client.threads.get_state(tid)
    assert after_state["next"] == [] and after_state["values"] == state["values"]
    newest = await _newest_checkpoint(cluster.db_url, tid)
    assert newest == before  # the thread did not go back in time
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"
    recs = read_records(cluster.record, tag)
    # the stale attempt finished the node it was stalled in, and started no further node
    assert [n for n, p in recs if p == pid] == [*after, stalled_in], recs
    line = next(ln for ln in victim.output().splitlines() if WARNING in ln and run["run_id"] in ln)
    assert " attempt=1 " in line and "current_attempt=2" in line, line
    # Readers see attempt 2 after attempt 1: the replay says where it starts.
    meta = [
        p.data
        async for p in client.runs.join_stream(tid, run["run_id"], last_event_id="-1")
        if p.event == "metadata"
    ]
    assert [m["attempt"] for m in meta][-1] == 2, meta


async def test_stalled_worker_in_sequential_node_writes_nothing(cluster: Cluster) -> None:
    await _stall_and_check(
        cluster, "steps", {"sleep": LEASE + 2.5}, after=["a"], stalled_in="b", final=["a", "b", "c"]
    )


async def test_stalled_worker_in_parallel_superstep_writes_nothing(cluster: Cluster) -> None:
    await _stall_and_check(
        cluster,
        "fan",
        {"sleep": LEASE + 2.5},
        after=["fast"],
        stalled_in="slow",
        final=["fast", "join", "slow"],
    )

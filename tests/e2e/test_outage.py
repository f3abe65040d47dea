"""Database outage, for real: a throwaway PostgreSQL cluster (initdb on a free port) is stopped
under a live `graphkeep serve` and started again on the same port.

While it is down the API answers 503 with Retry-After (never a 500, never a hang past
GRAPHKEEP_DB_TIMEOUT_SECONDS) and /ok stays alive; once it is back the same process serves
again without a restart, its workers execute runs again, and nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.pgcluster import Cluster, free_port, serve_on_cluster, system_pg_bin

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DB_TIMEOUT_SECONDS = 2.0
# a 503 must come back within the database timeout plus this much (scheduling, pre-ping)
SLACK_SECONDS = 3.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    bindir = system_pg_bin()
    if bindir is None:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) are required for this test")
    root = Path(tempfile.mkdtemp(prefix="gk_outage_"))
    db = Cluster(bindir, root, free_port())
    try:
        db.init()
        db.start()
        yield db
    finally:
        db.stop_quietly()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("outage") / "serve.log"
    with serve_on_cluster(
        cluster.url,
        log,
        db_timeout_seconds=str(DB_TIMEOUT_SECONDS),
        workers="2",
        sweep_interval_seconds="1",
    ) as (url, proc):
        yield url
        assert proc.poll() is None, "the server died during the outage:\n" + log.read_text()
        text = log.read_text()
        assert "unhandled error" not in text, text


def _run_to_completion(client: httpx.Client, thread_id: str, text: str) -> dict[str, object]:
    r = client.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}},
    )
    assert r.status_code == 200, r.text
    values: dict[str, object] = r.json()
    return values


async def _command_during_outage(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the answer to a run.start, the answer to a malformed frame sent after it)."""
    import websockets

    start = {"assistant_id": "agent", "input": {"messages": []}}
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"id": 1, "method": "run.start", "params": start}))
        wait = DB_TIMEOUT_SECONDS + SLACK_SECONDS
        failed: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), wait))
        await ws.send("{not json")
        alive: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), wait))
    return failed, alive


def _status_500_count(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "graphkeep_http_requests_total" and sample.labels["status"] == "500"
    )


def test_outage_answers_503_then_recovers_without_restart(cluster: Cluster, server: str) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        # acknowledged before the outage
        thread = client.post("/threads", json={"metadata": {"phase": "before"}})
        assert thread.status_code == 200, thread.text
        thread_id = thread.json()["thread_id"]
        before = _run_to_completion(client, thread_id, "remember me")
        assert before["messages"]
        assert client.get("/ready").status_code == 200

        cluster.stop()
        try:
            probes = [
                ("GET", f"/threads/{thread_id}", None),
                ("POST", "/threads", {"metadata": {"phase": "during"}}),
                ("POST", "/threads/search", {"limit": 5}),
                ("GET", f"/threads/{thread_id}/state", None),
                ("POST", f"/threads/{thread_id}/runs", {"assistant_id": "agent", "input": {}}),
                ("GET", "/ready", None),
            ]
            for _ in range(2):  # first against a stale pool, then against a refusing server
                for method, path, body in probes:
                    started = time.monotonic()
                    r = client.request(method, path, json=body)
                    elapsed = time.monotonic() - started
                    assert r.status_code == 503, (method, path, r.status_code, r.text)
                    assert r.headers.get("retry-after"), (method, path)
                    assert isinstance(r.json()["detail"], str)
                    assert elapsed < DB_TIMEOUT_SECONDS + SLACK_SECONDS, (method, path, elapsed)
            # a thread-stream command over WebSocket gets the socket's 503, on its own id,
            # and the socket stays open (before, the error killed the socket unanswered)
            ws_url = server.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
            failed, alive = asyncio.run(_command_during_outage(ws_url))
            assert failed == {
                "type": "error",
                "id": 1,
                "error": "unknown_error",
                "message": "the database is unavailable; retry shortly",
            }
            assert alive["id"] is None and alive["error"] == "invalid_argument"
            assert client.get("/ok").status_code == 200  # alive, just not ready
            assert client.get("/metrics").status_code == 200  # scrapes work without a DB
            time.sleep(2)  # let workers and sweepers hit the outage too
        finally:
            cluster.start()

        deadline = time.monotonic() + 60
        while client.get("/ready").status_code != 200:
            assert time.monotonic() < deadline, "did not become ready after the database came back"
            time.sleep(0.25)

        # nothing acknowledged was lost
        kept = client.get(f"/threads/{thread_id}")
        assert kept.status_code == 200, kept.text
        assert kept.json()["metadata"]["phase"] == "before"
        state = client.get(f"/threads/{thread_id}/state").json()
        assert state["values"]["messages"] == before["messages"]
        # and everything works again: writes, and workers execute runs
        fresh = client.post("/threads", json={"metadata": {"phase": "after"}})
        assert fresh.status_code == 200, fresh.text
        after = _run_to_completion(client, fresh.json()["thread_id"], "hello again")
        assert after["messages"]
        assert _status_500_count(client) == 0


def test_no_acknowledged_write_is_lost_across_a_crash(cluster: Cluster, server: str) -> None:
    """Writes race the database going down: every write answered 200 survives the crash
    (stop -m immediate is a crash: WAL recovery on restart); the rest got 503, not 500."""
    acknowledged: list[str] = []
    statuses: set[int] = set()
    stop_writing = threading.Event()

    def write() -> None:
        with httpx.Client(base_url=server, timeout=30) as client:
            n = 0
            while not stop_writing.is_set():
                n += 1
                r = client.post("/threads", json={"metadata": {"n": n}})
                statuses.add(r.status_code)
                if r.status_code == 200:
                    acknowledged.append(r.json()["thread_id"])

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(1.0)
        cluster.stop()
        time.sleep(1.5)
    finally:
        cluster.start()
        time.sleep(1.0)
        stop_writing.set()
        writer.join(60)
    assert statuses <= {200, 503}, statuses
    assert 503 in statuses and len(acknowledged) > 5
    with httpx.Client(base_url=server, timeout=30) as client:
        deadline = time.monotonic() + 60
        while client.get("/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.25)
        missing = [t for t in acknowledged if client.get(f"/threads/{t}").status_code != 200]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged threads were lost"

"""PostgreSQL frozen with its connections open (every process of a throwaway cluster
SIGSTOPped) for longer than the run lease, under a steady bounded load on a live
`graphkeep serve`: no request waits past the database timeout (plus slack), completed runs
keep their status, and every acknowledged run and thread is there afterwards and finishes.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.pgcluster import Cluster, free_port, serve_on_cluster, system_pg_bin

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DB_TIMEOUT_SECONDS = 2.0
LEASE_SECONDS = 3.0
FREEZE_SECONDS = 6.0  # longer than the lease
SLACK_SECONDS = 2.0  # scheduling on a loaded 2-core box, on top of the +1 s command timeout


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    bindir = system_pg_bin()
    if bindir is None:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) are required for this test")
    root = Path(tempfile.mkdtemp(prefix="gk_freeze_"))
    db = Cluster(bindir, root, free_port())
    try:
        db.init()
        db.start()
        yield db
    finally:
        _signal_cluster(db, signal.SIGCONT)
        db.stop_quietly()
        shutil.rmtree(root, ignore_errors=True)


def _cluster_pids(db: Cluster) -> list[int]:
    """The postmaster and every process it forked (backends, checkpointer, ...)."""
    postmaster = int((db.data / "postmaster.pid").read_text().splitlines()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                pids.append(int(entry.name))
    return pids


def _signal_cluster(db: Cluster, sig: signal.Signals) -> None:
    for pid in _cluster_pids(db) if (db.data / "postmaster.pid").exists() else []:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def server(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("freeze") / "serve.log"
    with serve_on_cluster(
        cluster.url,
        log,
        db_timeout_seconds=str(DB_TIMEOUT_SECONDS),
        lease_seconds=str(LEASE_SECONDS),
        # a freeze longer than the lease costs every running run an attempt (its lease lapses
        # and it is recovered); the attempt budget is not what this test measures
        max_attempts="10",
        workers="2",
    ) as (url, proc):
        yield url
        assert proc.poll() is None, "the server died during the freeze:\n" + log.read_text()


def _run_body(text: str) -> dict[str, object]:
    return {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}}


def test_frozen_database_bounds_every_wait_and_loses_nothing(cluster: Cluster, server: str) -> None:
    client = httpx.Client(base_url=server, timeout=60)
    # Runs completed before the freeze: their outcome must not change.
    done: list[tuple[str, str]] = []
    for i in range(3):
        tid = client.post("/threads", json={}).json()["thread_id"]
        r = client.post(f"/threads/{tid}/runs/wait", json=_run_body(f"before {i}"))
        assert r.status_code == 200, r.text
        run_id = r.headers["content-location"].rsplit("/", 1)[1]
        done.append((tid, run_id))

    latencies: list[tuple[float, str, int]] = []
    acknowledged: list[tuple[str, str]] = []  # (thread, run) answered 200 while loading
    stop = threading.Event()
    errors: list[str] = []

    def load() -> None:
        own = httpx.Client(base_url=server, timeout=60)
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                r = own.post("/threads", json={})
                latencies.append((time.monotonic() - started, "thread", r.status_code))
                if r.status_code != 200:
                    time.sleep(0.2)
                    continue
                tid = r.json()["thread_id"]
                started = time.monotonic()
                r = own.post(f"/threads/{tid}/runs", json=_run_body(f"load {n}"))
                latencies.append((time.monotonic() - started, "run", r.status_code))
                if r.status_code == 200:
                    acknowledged.append((tid, r.json()["run_id"]))
                started = time.monotonic()
                r = own.get(f"/threads/{tid}")
                latencies.append((time.monotonic() - started, "get", r.status_code))
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
            time.sleep(0.1)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    _signal_cluster(cluster, signal.SIGSTOP)
    try:
        time.sleep(FREEZE_SECONDS)
    finally:
        _signal_cluster(cluster, signal.SIGCONT)
    time.sleep(3.0)
    stop.set()
    for t in threads:
        t.join(60)

    assert not errors, errors
    bound = DB_TIMEOUT_SECONDS + 1.0 + SLACK_SECONDS
    slow = [entry for entry in latencies if entry[0] > bound]
    assert not slow, slow
    statuses = {status for _, _, status in latencies}
    assert statuses <= {200, 503}, statuses  # never a 500
    assert 503 in statuses  # the freeze was felt (else the test proves nothing)
    assert acknowledged

    for tid, run_id in done:  # completed runs kept their outcome
        assert client.get(f"/threads/{tid}/runs/{run_id}").json()["status"] == "success"
    deadline = time.monotonic() + 60
    for tid, run_id in acknowledged:  # every acknowledged run is there and finishes
        while True:
            r = client.get(f"/threads/{tid}/runs/{run_id}")
            assert r.status_code == 200, r.text
            if r.json()["status"] not in ("pending", "running"):
                break
            assert time.monotonic() < deadline, r.json()
            time.sleep(0.2)
        assert r.json()["status"] == "success", r.json()

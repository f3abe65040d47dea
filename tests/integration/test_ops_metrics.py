"""/metrics: names and labels, route templates, SSE pass-through, promtool, token, processes."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.config import Settings
from app.db.engine import create_engine
from app.db.tables import runs, threads
from app.db.types import utcnow
from app.main import create_app
from app.ops.sampler import sample_pool
from app.runs import queue
from app.store import SQLStore


def promtool() -> str:
    """promtool's path; skips locally without it, fails in CI (scripts/test installs it)."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI; scripts/test installs Debian's prometheus")
        pytest.skip("promtool not installed")
    return path


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def _value(text: str, name: str, **labels: str) -> float:
    return _samples(text).get((name, frozenset(labels.items())), 0.0)


def _with_test_routes(app: FastAPI) -> FastAPI:
    @app.get("/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"thing_id": thing_id}

    return app


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = _with_test_routes(create_app(Settings(database_url=db_url)))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


async def test_requests_are_counted_by_route_template_never_by_id(
    client: httpx.AsyncClient,
) -> None:
    before = (await client.get("/metrics")).text
    for thing in ("a1", "b2", "c3"):
        assert (await client.get(f"/things/{thing}")).status_code == 200
    assert (await client.get("/no/such/route/xyz")).status_code == 404

    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    labels = {"route": "/things/{thing_id}", "method": "GET", "status": "200"}
    name = "graphkeep_http_requests_total"
    assert _value(text, name, **labels) - _value(before, name, **labels) == 3
    duration = "graphkeep_http_request_duration_seconds_count"
    assert _value(text, duration, **labels) - _value(before, duration, **labels) == 3
    unmatched = {"route": "<unmatched>", "method": "GET", "status": "404"}
    assert _value(text, name, **unmatched) - _value(before, name, **unmatched) == 1
    # no id and no raw path ever becomes a label value
    for needle in ("a1", "b2", "c3", "xyz"):
        assert f'"{needle}"' not in text and f"/{needle}" not in text


async def test_every_metric_is_exposed_with_conventional_names(
    client: httpx.AsyncClient,
) -> None:
    text = (await client.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for metric in metrics.ALL_METRICS:
        name = metric._name  # family name (counters without the _total suffix)
        assert name.startswith("graphkeep_")
        assert name in families, f"{name} missing from /metrics"
        kind = families[name].type
        if kind == "counter":
            assert f"{name}_total" in metrics.exposed_names()
        if kind == "histogram":
            assert name.endswith(("_seconds", "_bytes", "_length"))
        for label in metric._labelnames:
            assert not label.endswith("_id") or label == "graph_id"


async def test_helpers_record_labelled_samples(client: httpx.AsyncClient) -> None:
    before = (await client.get("/metrics")).text
    metrics.count_run_created("agent")
    metrics.observe_run_finished("agent", "success", 1.5)
    metrics.observe_queue_wait("agent", 0.2)
    metrics.observe_checkpoint_put(0.004, 2048)
    metrics.observe_store_operation("search", 0.01)
    metrics.observe_store_batch(["put", "put"], 0.02)
    metrics.observe_store_batch(["get", "put"], 0.03)
    metrics.stream_subscribed()
    text = (await client.get("/metrics")).text
    metrics.stream_unsubscribed()

    def delta(name: str, **labels: str) -> float:
        return _value(text, name, **labels) - _value(before, name, **labels)

    assert delta("graphkeep_runs_created_total", graph_id="agent") == 1
    assert delta("graphkeep_runs_finished_total", graph_id="agent", status="success") == 1
    assert delta("graphkeep_run_duration_seconds_sum", graph_id="agent", status="success") == 1.5
    assert delta("graphkeep_run_queue_wait_seconds_count", graph_id="agent") == 1
    assert delta("graphkeep_checkpoint_size_bytes_sum") == 2048
    assert delta("graphkeep_checkpoint_size_bytes_bucket", le="4096.0") == 1
    assert delta("graphkeep_checkpoint_size_bytes_bucket", le="1024.0") == 0
    assert delta("graphkeep_store_operation_duration_seconds_count", op="search") == 1
    assert delta("graphkeep_store_operation_duration_seconds_count", op="put") == 1
    assert delta("graphkeep_store_operation_duration_seconds_count", op="batch") == 1
    assert delta("graphkeep_stream_subscribers") == 1


async def test_pool_gauge_counts_checked_out_connections(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        # checked out without a statement: SQLite's BEGIN IMMEDIATE would serialise two
        async with engine.connect(), engine.connect():
            sample_pool(engine)
            busy = metrics.render().decode()
        sample_pool(engine)
        idle = metrics.render().decode()
    finally:
        await engine.dispose()
    assert _value(busy, "graphkeep_db_pool_connections_in_use") == 2
    assert _value(idle, "graphkeep_db_pool_connections_in_use") == 0
    assert _value(idle, "graphkeep_db_pool_connections") == 2  # both idle in the pool


async def test_queue_depth_is_sampled_from_the_runs_table(client: httpx.AsyncClient) -> None:
    text_ = (await client.get("/metrics")).text
    assert _value(text_, "graphkeep_run_queue_depth") == 0
    assert "graphkeep_runs_running" in text_


async def test_promtool_check_metrics_reports_nothing(client: httpx.AsyncClient) -> None:
    await client.get("/things/x")
    metrics.observe_run_finished("agent", "error", 0.1)
    text = (await client.get("/metrics")).text
    proc = subprocess.run(
        [promtool(), "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    report = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0, report
    assert report.strip() == "", report


async def test_metrics_token_is_required_when_configured(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, metrics_token=SecretStr("s3cret-scrape"))
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            assert (await c.get("/metrics")).status_code == 401
            bad = await c.get("/metrics", headers={"Authorization": "Bearer nope"})
            assert bad.status_code == 401
            assert "s3cret" not in bad.text
            good = await c.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape"})
            assert good.status_code == 200
            assert "graphkeep_http_requests_total" in good.text


# --------------------------------------------------------------------------- live server


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def test_streaming_responses_pass_through_unbuffered(sqlite_url: str) -> None:
    """The first SSE chunk reaches the client while the stream is still open."""
    release = asyncio.Event()
    app = create_app(Settings(database_url=sqlite_url))

    @app.get("/test-stream")
    async def stream() -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b"event: metadata\ndata: {}\n\n"
            await release.wait()
            yield b"event: end\ndata: null\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    sock = _free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serve = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            async with c.stream("GET", "/test-stream") as r:
                chunks = r.aiter_bytes()
                first = await asyncio.wait_for(chunks.__anext__(), timeout=5)
                assert first.startswith(b"event: metadata")
                assert "x-request-id" in r.headers
                release.set()
                rest = b"".join([c async for c in chunks])
                assert b"event: end" in rest
            text = (await c.get("/metrics")).text
        labels = {"route": "/test-stream", "method": "GET", "status": "200"}
        assert _value(text, "graphkeep_http_requests_total", **labels) >= 1
    finally:
        release.set()
        server.should_exit = True
        await asyncio.wait_for(serve, timeout=10)
        sock.close()


_CHILD = """
import sys
from app import metrics
metrics.count_run_created("g")
metrics.observe_checkpoint_put(0.01, 1000)
metrics.set_db_pool(int(sys.argv[1]), 5)
"""


def test_multiprocess_mode_aggregates_every_process(tmp_path: Path) -> None:
    """Two processes write; a third renders the sum (PROMETHEUS_MULTIPROC_DIR set)."""
    env = {**os.environ, metrics.MULTIPROC_ENV: str(tmp_path)}
    for in_use in ("2", "3"):
        subprocess.run([sys.executable, "-c", _CHILD, in_use], env=env, check=True, timeout=60)
    render = "from app import metrics; import sys; sys.stdout.write(metrics.render().decode())"
    out = subprocess.run(
        [sys.executable, "-c", render], env=env, check=True, capture_output=True, timeout=60
    ).stdout.decode()
    assert _value(out, "graphkeep_runs_created_total", graph_id="g") == 2
    assert _value(out, "graphkeep_checkpoint_size_bytes_sum") == 2000
    assert _value(out, "graphkeep_checkpoint_put_duration_seconds_count") == 2
    # livesum gauges drop processes that are gone only once marked dead; both children exited
    # without that, so the sum still counts them (the serve command marks its own exit)
    assert _value(out, "graphkeep_db_pool_connections_in_use") == 5
    if shutil.which("promtool") or os.environ.get("CI") == "true":
        proc = subprocess.run(
            [promtool(), "check", "metrics"], input=out.encode(), capture_output=True, timeout=60
        )
        assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip()


async def test_store_operations_are_timed_by_op(engine: AsyncEngine) -> None:
    store = SQLStore(engine)
    before = metrics.render().decode()
    await store.aput(("prefs", "u1"), "theme", {"dark": True})
    await store.aget(("prefs", "u1"), "theme")
    await store.asearch(("prefs",))
    await store.adelete(("prefs", "u1"), "theme")
    after = metrics.render().decode()
    name = "graphkeep_store_operation_duration_seconds_count"
    for op in ("put", "get", "search", "delete"):
        assert _value(after, name, op=op) - _value(before, name, op=op) == 1, op


async def test_a_run_records_its_lifecycle(client: httpx.AsyncClient) -> None:
    before = (await client.get("/metrics")).text
    thread_id = (await client.post("/threads", json={})).json()["thread_id"]
    for text_in in ("hello", "again"):
        r = await client.post(
            f"/threads/{thread_id}/runs/wait",
            json={
                "assistant_id": "agent",
                "input": {"messages": [{"role": "user", "content": text_in}]},
            },
        )
        assert r.status_code == 200, r.text
    history = "graphkeep_thread_history_length_count"
    for _ in range(100):  # observed after the run's readers got their answer
        after = (await client.get("/metrics")).text
        if _value(after, history) - _value(before, history) >= 2:
            break
        await asyncio.sleep(0.05)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("graphkeep_runs_created_total", graph_id="agent") == 2
    assert delta("graphkeep_runs_finished_total", graph_id="agent", status="success") == 2
    assert delta("graphkeep_run_duration_seconds_count", graph_id="agent", status="success") == 2
    # claimed by a worker or dispatched directly at creation: every run's wait is observed
    assert delta("graphkeep_run_queue_wait_seconds_count", graph_id="agent") == 2
    assert delta("graphkeep_thread_history_length_count") == 2
    # the second run's thread has more checkpoints than the first's: both land in buckets
    assert delta("graphkeep_thread_history_length_sum") >= 2 + 4
    assert delta("graphkeep_checkpoint_put_duration_seconds_count") >= 4
    assert delta("graphkeep_checkpoint_size_bytes_sum") > 0


async def test_runs_recovered_after_a_lost_lease_are_counted(engine: AsyncEngine) -> None:
    now = utcnow()
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with engine.begin() as conn:
        await conn.execute(
            insert(threads).values(
                thread_id=thread_id, tenant_id="default", status="busy", metadata={}, config={},
                values=None, interrupts={}, created_at=now, updated_at=now, state_updated_at=now,
            )
        )  # fmt: skip
        await conn.execute(
            insert(runs).values(
                run_id=run_id, tenant_id="default", thread_id=thread_id,
                assistant_id=str(uuid.uuid4()), graph_id="crashy", status="running", metadata={},
                kwargs={}, multitask_strategy="reject", created_at=now, updated_at=now,
                available_at=now, worker_id="dead-worker", attempt=1,
                lease_expires_at=now - timedelta(seconds=5),
            )
        )  # fmt: skip
    before = metrics.render().decode()
    assert await queue.reap_expired(engine) == [run_id]
    claimed = await queue.claim(engine, worker_id="w2", lease_seconds=30)
    after = metrics.render().decode()
    assert claimed is not None and claimed.run_id == run_id and claimed.attempt == 2

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("graphkeep_runs_recovered_total", graph_id="crashy") == 1
    assert delta("graphkeep_run_queue_wait_seconds_count", graph_id="crashy") == 1

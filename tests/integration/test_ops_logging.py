"""Structured logs: JSON lines carry request/tenant/thread/run ids, never state or secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from app.config import Settings
from app.logging import configure, context_with, current_context, log_context
from app.main import create_app

log = logging.getLogger("tests.ops_logging")


@pytest.fixture
def json_logs(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    configure(Settings(log_format="json", log_level="INFO"))
    yield capsys
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_url=db_url))

    @app.post("/threads/{thread_id}/runs/{run_id}/probe")
    async def probe(thread_id: str, run_id: str) -> dict[str, str]:
        log.info(
            "probe handled",
            extra={
                "values": {"messages": ["STATE-VALUE-123"]},
                "token": "tok-SECRET-456",
                "api_key": "gk_SECRET",
                "attempt": 2,
            },
        )
        return {"ok": "yes"}

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


def _lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


async def test_json_line_carries_ids_and_drops_state_and_secrets(
    client: httpx.AsyncClient, json_logs: pytest.CaptureFixture[str]
) -> None:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    r = await client.post(
        f"/threads/{thread_id}/runs/{run_id}/probe",
        headers={"Authorization": "Bearer tok-SECRET-456", "X-Request-ID": "req-abc.1"},
        json={"input": {"messages": ["STATE-VALUE-123"]}},
    )
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "req-abc.1"
    err = json_logs.readouterr().err
    probe = [line for line in _lines(err) if line["message"] == "probe handled"]
    assert len(probe) == 1, err
    record = probe[0]
    assert record["level"] == "INFO"
    assert record["logger"] == "tests.ops_logging"
    assert record["request_id"] == "req-abc.1"
    assert record["tenant_id"] == "default"
    assert record["thread_id"] == thread_id
    assert record["run_id"] == run_id
    assert record["attempt"] == 2
    for secret in ("STATE-VALUE-123", "tok-SECRET-456", "gk_SECRET"):
        assert secret not in err


async def test_request_id_is_generated_when_missing_or_unsafe(
    client: httpx.AsyncClient, json_logs: pytest.CaptureFixture[str]
) -> None:
    generated = (await client.get("/ok")).headers["x-request-id"]
    assert len(generated) == 32 and int(generated, 16) >= 0
    assert (await client.get("/ok")).headers["x-request-id"] != generated  # one per request
    unsafe = await client.get("/ok", headers={"X-Request-ID": "bad id\twith spaces"})
    assert unsafe.headers["x-request-id"] != "bad id\twith spaces"


def test_worker_context_binds_and_restores(json_logs: pytest.CaptureFixture[str]) -> None:
    with log_context(run_id="r-1", thread_id="t-1", tenant_id="acme"):
        log.info("run step")
        assert current_context() == {"run_id": "r-1", "thread_id": "t-1", "tenant_id": "acme"}
    log.info("after run")
    assert current_context() == {}
    lines = _lines(json_logs.readouterr().err)
    step = next(line for line in lines if line["message"] == "run step")
    after = next(line for line in lines if line["message"] == "after run")
    assert (step["run_id"], step["thread_id"], step["tenant_id"]) == ("r-1", "t-1", "acme")
    assert "run_id" not in after


def test_text_format_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    configure(Settings(log_format="text", log_level="DEBUG"))
    try:
        with log_context(run_id="r-9"):
            log.warning("worker paused", extra={"password": "hunter2", "retry_in": 1.5})
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "worker paused" in ln)
    assert "WARNING" in line and "tests.ops_logging: worker paused" in line
    assert "run_id=r-9" in line and "retry_in=1.5" in line
    assert "hunter2" not in err
    assert not line.startswith("{")


async def test_task_started_with_context_with_logs_its_run(
    json_logs: pytest.CaptureFixture[str],
) -> None:
    async def step() -> None:
        log.info("inside run task")

    task = asyncio.create_task(
        step(), context=context_with(run_id="r-7", thread_id="t-7", tenant_id="acme")
    )
    await task
    log.info("outside run task")
    lines = _lines(json_logs.readouterr().err)
    inside = next(line for line in lines if line["message"] == "inside run task")
    outside = next(line for line in lines if line["message"] == "outside run task")
    assert (inside["run_id"], inside["thread_id"], inside["tenant_id"]) == ("r-7", "t-7", "acme")
    assert "run_id" not in outside


async def test_each_request_gets_one_structured_access_line(
    client: httpx.AsyncClient, json_logs: pytest.CaptureFixture[str]
) -> None:
    thread_id = str(uuid.uuid4())
    r = await client.get(f"/threads/{thread_id}", headers={"X-Request-ID": "req-404"})
    assert r.status_code == 404
    access = [
        line
        for line in _lines(json_logs.readouterr().err)
        if line["logger"] == "graphkeep.access" and line.get("request_id") == "req-404"
    ]
    assert len(access) == 1
    line = access[0]
    assert line["message"] == "request"
    assert (line["method"], line["status"]) == ("GET", 404)
    assert line["route"] == "/threads/{thread_id}"
    assert line["thread_id"] == thread_id and line["tenant_id"] == "default"
    assert isinstance(line["duration_ms"], float | int)

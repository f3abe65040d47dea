"""Webhooks (official payload, retries, signature, delivery status) and redaction of what
leaves the server (SSE, webhooks, logs, error messages) while state keeps real values.

A live `graphkeep serve` (encrypted, `GRAPHKEEP_REDACT_KEYS=["text","password"]`) posts to a
local receiver that answers 500 twice, then 200.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.db.engine import create_engine
from app.db.tables import webhook_deliveries
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import serve

SECRET = "hook-secret"
pytestmark = pytest.mark.timeout(180)


class Receiver:
    """Answers `failures` 500s per path, then 200; keeps every request."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with receiver.lock:
                    receiver.requests.append((self.path, dict(self.headers), body))
                    seen = sum(1 for p, _, _ in receiver.requests if p == self.path)
                self.send_response(500 if seen <= receiver.failures else 200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self, path: str) -> list[tuple[dict[str, str], bytes]]:
        with self.lock:
            return [(h, b) for p, h, b in self.requests if p == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(failures=2)
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = fresh_database(str(request.param), tmp_path)
    yield url
    if request.param == "postgres":
        drop_pg_database(url)


def _wait_for(receiver: Receiver, path: str, count: int) -> list[tuple[dict[str, str], bytes]]:
    deadline = time.monotonic() + 30
    while len(receiver.bodies(path)) < count:
        assert time.monotonic() < deadline, receiver.requests
        time.sleep(0.05)
    return receiver.bodies(path)


async def _deliveries(db_url: str) -> dict[str, Any]:
    engine = create_engine(db_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(webhook_deliveries))).all()
        return {r.run_id: r for r in rows}
    finally:
        await engine.dispose()


def test_webhooks_retry_sign_and_redact(database: str, tmp_path: Path, receiver: Receiver) -> None:
    import asyncio

    env = {
        "GRAPHKEEP_ENCRYPTION_KEY": base64.b64encode(b"w" * 32).decode(),
        "GRAPHKEEP_REDACT_KEYS": '["text", "password", "tag"]',
        "GRAPHKEEP_WEBHOOK_SECRET": SECRET,
        "GRAPHKEEP_WEBHOOK_BACKOFF_SECONDS": "0.05",
        "GRAPHKEEP_LOG_LEVEL": "INFO",
    }
    with serve(database, tmp_path, workers=1, env=env) as proc:
        with httpx.Client(base_url=str(proc.url), timeout=30) as http:
            tid = http.post("/threads", json={}).json()["thread_id"]
            body = {
                "assistant_id": "echo",
                "input": {"text": "SECRETVALUE"},
                "webhook": f"{receiver.url}/ok",
                "stream_mode": ["values", "updates"],
            }
            with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as s:
                sse = s.read().decode()
            assert '"text":"[redacted]"' in sse and "SECRETVALUE" not in sse
            # the thread stream replays the same events, masked the same way
            seen = ""
            with http.stream("GET", f"/threads/{tid}/stream", headers={"Last-Event-ID": "0"}) as s:
                for line in s.iter_lines():
                    seen += line + "\n"
                    if line.startswith("data:") and "[redacted]" in line:
                        break
            assert '"text":"[redacted]"' in seen and "SECRETVALUE" not in seen
            # the graph's state keeps the real value
            state = http.get(f"/threads/{tid}/state").json()
            assert state["values"] == {"text": "SECRETVALUE"}

            fail = {
                "assistant_id": "failing",
                "input": {"tag": "password=hunter2"},
                "webhook": f"{receiver.url}/failed",
            }
            t2 = http.post("/threads", json={}).json()["thread_id"]
            with http.stream("POST", f"/threads/{t2}/runs/stream", json=fail) as s:
                failed_sse = s.read().decode()
            assert "event: error" in failed_sse and "hunter2" not in failed_sse
            assert "password=[redacted]" in failed_sse

        ok = _wait_for(receiver, "/ok", 3)
        bad = _wait_for(receiver, "/failed", 3)
        time.sleep(0.3)  # the delivery row is written after the last answer
        log = proc.output()
    assert len(receiver.bodies("/ok")) == 3  # two 500s, then delivered: no fourth try

    headers, raw = ok[-1]
    stamp = headers["X-Graphkeep-Timestamp"]
    expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + raw, hashlib.sha256)
    assert headers["X-Graphkeep-Signature"] == f"sha256={expected.hexdigest()}"
    payload = json.loads(raw)
    official = {"run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status",
                "metadata", "kwargs", "multitask_strategy", "run_started_at", "run_ended_at",
                "webhook_sent_at", "values"}  # fmt: skip
    assert official <= set(payload)
    assert payload["status"] == "success" and payload["thread_id"] == tid
    assert payload["values"] == {"text": "[redacted]"}
    assert payload["kwargs"]["input"] == {"text": "[redacted]"}
    assert b"SECRETVALUE" not in raw

    failed = json.loads(bad[-1][1])
    assert failed["status"] == "error"
    assert failed["error"]["error"] == "ValueError"
    assert failed["error"]["message"] == "boom: password=[redacted]"

    rows = asyncio.run(_deliveries(database))
    assert {r.status for r in rows.values()} == {"delivered"}
    assert {r.attempts for r in rows.values()} == {3}
    assert "SECRETVALUE" not in log and "hunter2" not in log


def test_webhook_gives_up_after_the_configured_attempts(
    database: str, tmp_path: Path, receiver: Receiver
) -> None:
    import asyncio

    receiver.failures = 100
    env = {"GRAPHKEEP_WEBHOOK_MAX_ATTEMPTS": "2", "GRAPHKEEP_WEBHOOK_BACKOFF_SECONDS": "0.05"}
    with serve(database, tmp_path, workers=1, env=env) as proc:
        body = {"assistant_id": "echo", "input": {"text": "x"}, "webhook": f"{receiver.url}/d"}
        r = httpx.post(f"{proc.url}/runs/wait", json=body, timeout=30)
        assert r.status_code == 200
        _wait_for(receiver, "/d", 2)
        time.sleep(0.5)
        assert len(receiver.bodies("/d")) == 2
        assert "Graphkeep-Signature" not in str(receiver.bodies("/d")[0][0])
    rows = asyncio.run(_deliveries(database))
    (row,) = rows.values()
    assert (row.status, row.attempts, row.response_status) == ("failed", 2, 500)

"""A run's webhook against the database, on both dialects: the run and the thread's values
are read for the caller's tenant only, and the outcome is recorded once per run (a later
delivery replaces the earlier record). The receiver is a loopback port nobody listens on,
so each delivery fails at once with a connection error, one try."""

from __future__ import annotations

import socket
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import runs, webhook_deliveries
from app.db.types import utcnow
from app.runs.webhooks import FAILED, WebhookPolicy, send_run_webhook
from app.threads.schemas import ThreadCreate
from app.threads.service import ThreadService


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


async def _final_run(engine: AsyncEngine, tenant_id: str) -> tuple[str, str]:
    threads = ThreadService(engine=engine, graphs=None, saver=None)  # rows only
    thread = await threads.create_thread(tenant_id=tenant_id, body=ThreadCreate())
    run_id, now = str(uuid.uuid4()), utcnow()
    async with engine.begin() as conn:
        await conn.execute(
            runs.insert().values(
                run_id=run_id, tenant_id=tenant_id, thread_id=thread.thread_id,
                assistant_id=str(uuid.uuid4()), graph_id="g", status="success", attempt=1,
                metadata={}, kwargs={}, multitask_strategy="enqueue", created_at=now,
                updated_at=now, available_at=now, ended_at=now,
            )
        )  # fmt: skip
    return run_id, thread.thread_id


async def _deliveries(engine: AsyncEngine) -> list[tuple[Any, ...]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(
                webhook_deliveries.c.run_id,
                webhook_deliveries.c.tenant_id,
                webhook_deliveries.c.status,
                webhook_deliveries.c.attempts,
            )
        )
        return [tuple(r) for r in rows]


async def test_webhook_outcome_recorded_once_per_run_for_its_tenant(engine: AsyncEngine) -> None:
    policy = WebhookPolicy(max_attempts=1, timeout_seconds=5)
    run_id, thread_id = await _final_run(engine, "acme")
    url = _closed_port_url()

    # another tenant names the run: nothing is read, sent or recorded
    assert (
        await send_run_webhook(engine, policy, run_id=run_id, tenant_id="globex", url=url) is None
    )
    assert await _deliveries(engine) == []

    first = await send_run_webhook(engine, policy, run_id=run_id, tenant_id="acme", url=url)
    assert first is not None and first.status == FAILED and first.attempts == 1
    assert first.last_error == "ConnectError"
    assert await _deliveries(engine) == [(run_id, "acme", FAILED, 1)]

    # a later delivery of the same run replaces its record
    again = WebhookPolicy(max_attempts=2, backoff_seconds=0.01, timeout_seconds=5)
    second = await send_run_webhook(engine, again, run_id=run_id, tenant_id="acme", url=url)
    assert second is not None and second.attempts == 2
    async with engine.connect() as conn:
        row = (await conn.execute(select(webhook_deliveries))).one()
    assert (row.run_id, row.tenant_id, row.thread_id) == (run_id, "acme", thread_id)
    assert (row.attempts, row.url, row.delivered_at) == (2, url, None)

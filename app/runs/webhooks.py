"""Run webhooks as the LangGraph Agent Server sends them, with retries, status and a signature.

Payload (langgraph-api 0.16.7, `langgraph_api/webhook.py: call_webhook`): the run object
(`run_id`, `thread_id`, `assistant_id`, `created_at`, `updated_at`, `status`, `metadata`,
`kwargs`, `multitask_strategy`) plus `run_started_at`, `run_ended_at`, `webhook_sent_at`,
`values` (the thread's final values, None when there are none) and, for a failed run,
`error` (`{"error": "<type>", "message": "..."}`). The configured sensitive keys are masked
(app/redaction.py) before it leaves.

Delivery: POST with `content-type: application/json`; a connection error, a timeout, a 5xx
or a 429 is retried after 0.5 s, 1 s, 2 s, ... (capped at 30 s) up to `webhook_max_attempts`
tries; any other 4xx is final. The outcome (delivered / failed, attempts, last status or
error class, never the body) is recorded in `webhook_deliveries` and counted in
`graphkeep_webhook_deliveries_total{outcome}`. A webhook never changes the run's status.

langgraph.json: `webhooks.headers` are sent with every delivery (`${{ env.VAR }}` templates
resolved at start-up from variables named with `webhooks.env_prefix`), `webhooks.url` is
checked when a run is created (app/runs/prepare.py) and `http.disable_webhooks` sends none.

Signature (with `GRAPHKEEP_WEBHOOK_SECRET`): `X-Graphkeep-Timestamp: <unix seconds>` and
`X-Graphkeep-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`, so a
receiver can check the sender and refuse replays of old deliveries.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics, redaction
from app.db.access import read, transaction
from app.db.types import utcnow
from app.graphs.jsonable import dump_bytes
from app.runs import queries

log = logging.getLogger(__name__)

DELIVERED = "delivered"
FAILED = "failed"
SIGNATURE_HEADER = "X-Graphkeep-Signature"
TIMESTAMP_HEADER = "X-Graphkeep-Timestamp"
_MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True)
class WebhookPolicy:
    max_attempts: int = 4
    backoff_seconds: float = 0.5
    timeout_seconds: float = 10.0
    secret: bytes | None = field(default=None, repr=False)
    # langgraph.json `webhooks.headers` (templates resolved at start-up) and
    # `http.disable_webhooks` (runs still execute; nothing is sent)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    enabled: bool = True


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp`."""
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def build_payload(run: Any, values: Any) -> dict[str, Any]:
    """The official server's webhook body for a final `runs` row and the thread's values."""
    payload: dict[str, Any] = {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "status": run.status,
        "metadata": run.metadata,
        "kwargs": run.kwargs,
        "multitask_strategy": run.multitask_strategy,
        "run_started_at": _iso(run.started_at),
        "run_ended_at": _iso(run.ended_at),
        "webhook_sent_at": utcnow().isoformat(),
        "values": values,
    }
    if run.error:
        error = dict(run.error)
        if isinstance(error.get("message"), str):
            error["message"] = redaction.active().text(error["message"])
        payload["error"] = error
    masked: dict[str, Any] = redaction.active().value(payload)
    return masked


def _retriable(status: int) -> bool:
    return status >= 500 or status == 429


@dataclass
class Outcome:
    status: str
    attempts: int
    response_status: int | None = None
    last_error: str | None = None


async def post(url: str, body: bytes, policy: WebhookPolicy) -> Outcome:
    """POST `body` with the policy's retries; never raises for the receiver's failures."""
    # the configured static headers cannot replace the content type or the signature
    headers = {**policy.headers, "content-type": "application/json"}
    outcome = Outcome(FAILED, 0)
    async with httpx.AsyncClient(timeout=policy.timeout_seconds) as client:
        for attempt in range(1, policy.max_attempts + 1):
            if attempt > 1:
                delay = policy.backoff_seconds * 2 ** (attempt - 2)
                await asyncio.sleep(min(delay, _MAX_BACKOFF_SECONDS))
            if policy.secret is not None:
                stamp = str(int(time.time()))
                headers[TIMESTAMP_HEADER] = stamp
                headers[SIGNATURE_HEADER] = sign(policy.secret, stamp, body)
            outcome.attempts = attempt
            try:
                response = await client.post(url, content=body, headers=headers)
            except (httpx.TimeoutException, httpx.NetworkError) as exc:
                outcome.last_error, outcome.response_status = type(exc).__name__, None
                continue
            except (httpx.HTTPError, ValueError) as exc:  # a bad URL: no retry helps
                outcome.last_error = type(exc).__name__
                return outcome
            outcome.response_status = response.status_code
            if response.status_code < 400:
                outcome.status, outcome.last_error = DELIVERED, None
                return outcome
            outcome.last_error = f"HTTP {response.status_code}"
            if not _retriable(response.status_code):
                return outcome
    return outcome


async def send_run_webhook(
    engine: AsyncEngine, policy: WebhookPolicy, *, run_id: str, tenant_id: str, url: str
) -> Outcome | None:
    """Send a final run's webhook and record the outcome (None: the run is gone, or
    webhooks are disabled)."""
    if not policy.enabled:
        return None
    async with read(engine) as conn:
        row = (await conn.execute(*queries.run_row(tenant_id, run_id))).first()
        if row is None:  # a rolled-back run is gone: nothing to report
            return None
        values = (await conn.execute(queries.thread_values(tenant_id, row.thread_id))).scalar()
    body = dump_bytes(build_payload(row, values))
    outcome = await post(url, body, policy)
    metrics.count_webhook(outcome.status)
    if outcome.status != DELIVERED:
        log.warning(
            "webhook not delivered",
            extra={"attempts": outcome.attempts, "reason": outcome.last_error},
        )
    await _record(engine, row, url, outcome)
    return outcome


async def _record(engine: AsyncEngine, run: Any, url: str, outcome: Outcome) -> None:
    now = utcnow()
    async with transaction(engine) as conn:  # a later attempt of the same run replaces the row
        await conn.execute(queries.forget_webhook_delivery(run.tenant_id, run.run_id))
        await conn.execute(
            queries.insert_webhook_delivery(
                run.tenant_id,
                run.run_id,
                thread_id=run.thread_id,
                url=url,
                status=outcome.status,
                attempts=outcome.attempts,
                response_status=outcome.response_status,
                last_error=outcome.last_error,
                created_at=now,
                delivered_at=now if outcome.status == DELIVERED else None,
            )
        )

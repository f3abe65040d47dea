"""The run engine of one process: event hub, run service and (optionally) the worker pool."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.runs.events import EventHub
from app.runs.executor import RunExecutor
from app.runs.service import RunService
from app.runs.webhooks import WebhookPolicy
from app.runs.worker import WorkerPool


@dataclass
class RunEngine:
    hub: EventHub
    service: RunService
    pool: WorkerPool | None
    _drain: asyncio.Task[None] | None = None

    def begin_drain(self) -> None:
        """Start draining the workers now (idempotent); `aclose` waits for it.

        Called from the hub's shutdown hook at SIGTERM, so the drain does not wait for the
        HTTP server to finish its open connections first."""
        if self.pool is not None and self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self.pool.stop(), name="gk-drain")

    async def aclose(self) -> None:
        """End open streams and drain the workers (SIGTERM path), then stop listening."""
        self.hub.begin_shutdown()  # starts the drain too (hook), if SIGTERM did not already
        if self._drain is not None:
            await self._drain
        await self.hub.stop()


def webhook_policy(settings: Settings, config: Any = None) -> WebhookPolicy:
    """The settings' delivery policy plus langgraph.json's `webhooks.headers` and
    `http.disable_webhooks` (`config`: the ServerConfig, None for none)."""
    secret = settings.webhook_secret
    return WebhookPolicy(
        headers=dict(config.webhooks.headers) if config is not None else {},
        enabled=config is None or not config.http.is_disabled("disable_webhooks"),
        max_attempts=settings.webhook_max_attempts,
        backoff_seconds=settings.webhook_backoff_seconds,
        timeout_seconds=settings.webhook_timeout_seconds,
        secret=secret.get_secret_value().encode() if secret is not None else None,
    )


async def open_run_engine(
    *,
    settings: Settings,
    engine: AsyncEngine,
    graphs: Any,
    saver: Any,
    store: Any,
    workers: int,
) -> RunEngine:
    """Start the hub (LISTEN on PostgreSQL) and `workers` in-process worker slots (0: none)."""
    hub = EventHub(
        engine,
        retention_seconds=settings.stream_event_retention_seconds,
        keepalive_seconds=settings.stream_keepalive_seconds,
    )
    await hub.start()
    pool: WorkerPool | None = None
    if workers > 0:
        executor = RunExecutor(
            engine=engine,
            hub=hub,
            graphs=graphs,
            saver=saver,
            store=store,
            run_timeout_seconds=settings.run_timeout_seconds,
            max_attempts=settings.max_attempts,
            webhook_policy=webhook_policy(settings, getattr(graphs, "config", None)),
        )
        pool = WorkerPool(
            engine=engine,
            hub=hub,
            executor=executor,
            concurrency=workers,
            lease_seconds=settings.lease_seconds,
            drain_timeout_seconds=settings.drain_timeout_seconds,
            sweep_interval_seconds=settings.sweep_interval_seconds,
        )
        pool.start()
    # the service sees the pool only as the slots a new run may start on (LocalWorkers)
    service = RunService(engine=engine, hub=hub, graphs=graphs, saver=saver, workers=pool)
    run_engine = RunEngine(hub=hub, service=service, pool=pool)
    hub.shutdown_hooks.append(run_engine.begin_drain)
    return run_engine

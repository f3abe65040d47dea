"""The run engine of one process: event hub, run service and (optionally) the worker pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.runs.events import EventHub
from app.runs.executor import RunExecutor
from app.runs.service import RunService
from app.runs.worker import WorkerPool


@dataclass
class RunEngine:
    hub: EventHub
    service: RunService
    pool: WorkerPool | None

    async def aclose(self) -> None:
        """Drain the workers (SIGTERM path), then stop listening."""
        if self.pool is not None:
            await self.pool.stop()
        await self.hub.stop()


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
    service = RunService(engine=engine, hub=hub, graphs=graphs, saver=saver)
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
        service.local_pool = pool
    return RunEngine(hub=hub, service=service, pool=pool)

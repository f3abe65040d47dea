"""AppState: everything the lifespan owns (engine, saver, store, graphs, workers).

Built by `create_app`'s lifespan or by `graphkeep worker`, closed by them; nothing here is a
module-level singleton.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app import redaction
from app.assistants.service import AssistantService
from app.config import Settings
from app.db import migrate, sealed
from app.db.access import close_engine
from app.db.direct import DirectExecutor, fast_executor
from app.db.engine import create_engine, is_sqlite
from app.db.sealed import KeyMismatch
from app.errors import SchemaBehind
from app.threads.service import ThreadService

if TYPE_CHECKING:  # the classes only: importing them here would load every domain at import
    from app.checkpoint import SQLSaver
    from app.crons.scheduler import CronScheduler
    from app.crons.service import CronService
    from app.graphs.registry import GraphRegistry
    from app.runs.service import RunService
    from app.runs.worker import WorkerPool
    from app.store import SQLStore

log = logging.getLogger(__name__)


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    exit_stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    keyring: sealed.Keyring = field(default_factory=sealed.Keyring)
    # the one fast path behind the saver and the Store (app/db/direct.py)
    direct: DirectExecutor = field(init=False)
    # Attached by the start-up steps (app/main.py `startup_steps`), in this order; reading
    # one before its step ran is an AttributeError, not a None to check everywhere.
    saver: SQLSaver = field(init=False)
    graphs: GraphRegistry = field(init=False)
    store: SQLStore = field(init=False)
    runs: RunService = field(init=False)
    workers: WorkerPool | None = field(init=False)  # None: this process executes no runs
    crons: CronService = field(init=False)
    cron_scheduler: CronScheduler | None = field(init=False)  # None: no workers here
    # the domain services, built once by `open_state` when the steps have attached their parts
    threads: ThreadService = field(init=False)
    assistants: AssistantService = field(init=False)
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, coro: Awaitable[Any], *, name: str) -> asyncio.Task[Any]:
        """Start an owned background task; it is cancelled and awaited on close."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    async def close(self) -> None:
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
        await self.exit_stack.aclose()
        await self.direct.aclose()
        await close_engine(self.engine)  # with the connections `read` keeps parked


def build_keyring(settings: Settings) -> sealed.Keyring:
    """The configured encryption keys (current first, then GRAPHKEEP_ENCRYPTION_OLD_KEYS)."""
    current = settings.encryption_key
    old = settings.encryption_old_keys
    try:
        return sealed.Keyring.from_keys(
            current.get_secret_value() if current is not None else None,
            old.get_secret_value().split(",") if old is not None else (),
        )
    except ValueError as exc:
        raise KeyMismatch(str(exc)) from None


async def ensure_keys(engine: AsyncEngine, settings: Settings) -> sealed.Keyring:
    """Install the process's keyring and check it against the stored key ids (one line
    and no start when it cannot read what is stored)."""
    from app.ops.encryption import check_keys

    keyring = build_keyring(settings)
    sealed.install(keyring)
    await check_keys(engine, keyring)
    return keyring


async def ensure_schema(engine: AsyncEngine, url: str) -> None:
    """Embedded SQLite migrates itself; anything else must already be at head."""
    if is_sqlite(url):
        await migrate.upgrade(engine)
        return
    if not await migrate.is_at_head(engine):
        raise SchemaBehind(
            "the database schema is behind this version of graphkeep; "
            "run `graphkeep migrate` (the deploy step) and start again"
        )


# Steps that attach components to a fresh AppState, in order. Each module that owns a
# component registers its step here (see app/main.py); keeping the list explicit makes the
# start-up order visible in one place.
StartupStep = Callable[[AppState], Awaitable[None]]


async def open_state(settings: Settings, steps: list[StartupStep]) -> AppState:
    engine = create_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        timeout_seconds=settings.db_timeout_seconds,
        bounded=True,  # no request or worker step waits past the timeout (app/db/engine.py)
        autocommit=True,  # PostgreSQL: transactions only through app.db.access.transaction
    )
    state = AppState(settings=settings, engine=engine)
    state.direct = fast_executor(engine, closed_by_owner=True)  # `close` acloses it first
    try:
        await ensure_schema(engine, settings.database_url)
        redaction.install(redaction.Redactor(settings.redact_keys))
        state.keyring = await ensure_keys(engine, settings)
        for step in steps:
            await step(state)
        state.threads = ThreadService(
            engine=engine, graphs=state.graphs, saver=state.saver, store=state.store
        )
        state.assistants = AssistantService(engine=engine, graphs=state.graphs)
    except BaseException:
        await state.close()
        raise
    return state

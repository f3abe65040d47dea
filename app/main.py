"""create_app(settings): the FastAPI app and the lifespan that owns AppState."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app import __version__, redaction
from app.api import (
    assistants,
    crons,
    meta,
    ops,
    runs,
    store,
    thread_protocol,
    thread_protocol_ws,
    thread_stream,
    threads,
)
from app.api.allow import AllowHeaderMiddleware
from app.api.auth import install_auth
from app.api.authz import CustomAuthzMiddleware
from app.api.boundary import BoundaryCheckMiddleware
from app.api.custom_app import install_http_options, server_config
from app.api.docs import DOCS_PATH, HOME_TARGET, OPENAPI_PATH, install_docs
from app.api.errors import ServerErrorGuard, install_error_handlers
from app.api.metrics_middleware import ObservabilityMiddleware
from app.api.middleware import BodySizeLimitMiddleware
from app.api.routing import mount_flat, operation_id
from app.api.spec import install_openapi
from app.assistants.service import ensure_system_assistants
from app.auth.console_session import CONSOLE_PREFIX
from app.auth.custom import CustomAuth
from app.checkpoint import SQLSaver, make_serde
from app.config import Settings
from app.console.install import install_console
from app.crons.scheduler import CronScheduler
from app.crons.service import CronService
from app.db.engine import create_engine
from app.db.executor import Executor
from app.graphs.config import GraphConfigError, ServerConfig, read_config
from app.graphs.registry import load_registry
from app.ops.planner_stats import keep_planner_stats
from app.ops.retention import build_sweepers
from app.protocols.routes import install_protocols
from app.runs.engine import open_run_engine
from app.runs.threadlog.retention import log_sweeper, log_trimmer
from app.state import AppState, StartupStep, ensure_keys, ensure_schema, open_state
from app.store import SQLStore, parse_index_config, parse_ttl_config
from app.store.config import check_index_dims
from app.store.store import PgvectorMode
from app.store.validation import DEFAULT_MAX_VALUE_BYTES
from app.user_modules import add_dependency_paths

startup_log = logging.getLogger("graphkeep.startup")


async def _attach_saver(state: AppState) -> None:
    # No saver.setup(): the schema is Alembic's (ensure_schema has checked or migrated it).
    # langgraph.json's `checkpointer.serde` (read here: the graphs are attached after this)
    serde = (await asyncio.to_thread(server_config, state.settings)).serde
    state.saver = SQLSaver(
        state.engine,
        serde=make_serde(state.keyring, **serde.serializer_kwargs()),
        executor=state.direct,
    )


async def _attach_graphs(state: AppState) -> None:
    # Imports user modules off the event loop; a bad entry stops start-up naming it.
    state.graphs = await load_registry(state.settings.config_file)
    _install_redaction(state.settings.redact_keys, state.graphs.config.raw.get("redact"))


def _install_redaction(from_settings: list[str], from_config: object) -> None:
    """GRAPHKEEP_REDACT_KEYS plus langgraph.json's `"redact": [...]` (app/redaction.py)."""
    if from_config is None:
        from_config = []
    if not isinstance(from_config, list) or not all(isinstance(k, str) for k in from_config):
        raise GraphConfigError("langgraph.json: `redact` must be a list of keys / dotted paths")
    redaction.install(redaction.Redactor([*from_settings, *from_config]))


def _build_store(
    engine: AsyncEngine,
    config: ServerConfig,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    pgvector: PgvectorMode = "auto",
    executor: Executor | None = None,
) -> SQLStore:
    """The Store with langgraph.json's `store.index` / `store.ttl` (a bad one stops start-up)."""
    index = config.store_index
    ttl = config.store_ttl
    return SQLStore(
        engine,
        index=parse_index_config(index, base_dir=config.base_dir) if index else None,
        ttl=parse_ttl_config(ttl) if ttl else None,
        max_value_bytes=max_value_bytes,
        pgvector=pgvector,
        executor=executor,
    )


async def _attach_store(state: AppState) -> None:
    # Off the loop: an `embed` given as a file path is imported here.
    state.store = await asyncio.to_thread(
        _build_store,
        state.engine,
        state.graphs.config,
        state.settings.store_max_value_bytes,
        state.settings.store_pgvector,
        state.direct,
    )


async def _ensure_system_assistants(state: AppState) -> None:
    await ensure_system_assistants(state.engine, graphs=state.graphs)


async def _attach_runs(state: AppState) -> None:
    # Last: it needs graphs, saver and store; its workers start claiming at once. Closing
    # drains them (SIGTERM) before the engine is disposed.
    engine = await open_run_engine(
        settings=state.settings,
        engine=state.engine,
        graphs=state.graphs,
        saver=state.saver,
        store=state.store,
        workers=state.settings.workers,
    )
    state.runs = engine.service
    state.workers = engine.pool
    state.exit_stack.push_async_callback(engine.aclose)


async def _start_retention(state: AppState) -> None:
    # Thread TTL, stream-event expiry and Store TTL sweeps, owned (cancelled on close).
    sweepers = build_sweepers(
        engine=state.engine,
        saver=state.saver,
        store=state.store,
        checkpointer_ttl=state.graphs.config.checkpointer_ttl,
        sweep_interval_seconds=state.settings.sweep_interval_seconds,
        stream_event_retention_seconds=state.settings.stream_event_retention_seconds,
        trim_log=log_trimmer(state.engine),
        sweep_log=log_sweeper(state.engine),
    )
    for name, loop in sweepers.loops().items():
        state.spawn(loop, name=name)


async def _start_planner_stats(state: AppState) -> None:
    # PostgreSQL only: fresh statistics while the tables are young (app/ops/planner_stats.py).
    interval = state.settings.planner_stats_interval_seconds
    if interval > 0 and state.engine.dialect.name == "postgresql":
        keeper = keep_planner_stats(
            state.engine,
            interval_seconds=interval,
            timeout_seconds=state.settings.db_timeout_seconds,
        )
        state.spawn(keeper, name="gk-planner-stats")


async def _start_crons(state: AppState) -> None:
    # The cron API everywhere; the scheduler only where runs execute (serve with workers,
    # `graphkeep worker`): any number of them may run, each due time fires once.
    state.crons = CronService(engine=state.engine, graphs=state.graphs)
    state.cron_scheduler = None
    if state.settings.workers > 0:
        scheduler = CronScheduler(
            engine=state.engine,
            runs=state.runs,
            poll_seconds=state.settings.cron_poll_seconds,
            batch_size=state.settings.cron_batch_size,
        )
        state.cron_scheduler = scheduler
        state.spawn(scheduler.run_forever(), name="gk-cron-scheduler")


def startup_steps() -> list[StartupStep]:
    """Components attached to AppState at start, in order."""
    return [
        _attach_saver,
        _attach_graphs,
        _attach_store,
        _ensure_system_assistants,
        _attach_runs,
        _start_retention,
        _start_planner_stats,
        _start_crons,
    ]


async def check_startup(settings: Settings) -> None:
    """What `graphkeep serve` checks before binding: the schema and the graph config.

    Raises SchemaBehind, GraphConfigError or InvalidInput (a bad `store`, e.g. `index.dims`
    that the embedder does not return; all AppError) with a message for the operator.
    Embedded SQLite is migrated here, exactly as the lifespan would.
    """
    engine = create_engine(settings.database_url, null_pool=True)
    try:
        await ensure_schema(engine, settings.database_url)
        await ensure_keys(engine, settings)
    finally:
        await engine.dispose()
    registry = await load_registry(settings.config_file)
    store = await asyncio.to_thread(_build_store, engine, registry.config)
    if store.index is not None:
        unchecked = await check_index_dims(store.index)
        if unchecked is not None:
            startup_log.warning(
                "store.index.dims not checked: the embedder did not answer",
                extra={"error": unchecked},
            )


def database_description(database_url: str) -> dict[str, str]:
    """The database kind and where it is, for the start-up lines (never the password)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        return {"kind": "sqlite", "file": url.database or ":memory:"}
    where = f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"
    return {"kind": url.get_backend_name(), "at": where}


def log_startup(state: AppState, host: str, port: int) -> None:
    """What a newcomer needs from the first lines: where the server, its docs, its database
    and its graphs are. `host`/`port` are the bound ones (port 0 resolved)."""
    wildcard = host in ("0.0.0.0", "::", "")
    shown = "127.0.0.1" if wildcard else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{port}"
    listening = {"listening": "all interfaces"} if wildcard else {}
    startup_log.info(
        "graphkeep serving",
        extra={"version": __version__, "url": url, "docs": f"{url}{DOCS_PATH}", **listening},
    )
    startup_log.info("database", extra=database_description(state.settings.database_url))
    startup_log.info(
        "graphs loaded",
        extra={"graph_ids": ",".join(state.graphs.graph_ids()), "workers": state.settings.workers},
    )


# Allocations (net of frees) of container objects between two young-generation collections;
# CPython's default is 700. See `tune_garbage_collector`.
YOUNG_COLLECTION_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """Set CPython's garbage collector for a long-lived server, once start-up is done.

    First move what start-up allocated (imported modules, graphs, pydantic schemas: a few
    hundred thousand objects) out of the collector's reach. A full collection walks
    every tracked object; without this one took 60-130 ms in the middle of a request every
    few thousand requests, with it a few ms. Objects made later are collected as usual.

    Then collect the young generation less often. At CPython's default a server busy with
    runs collected it about every two runs, and the collector took 4-5 % of the process's
    CPU (1.6 s of 3,000 runs' 33 s at 32 clients, counted with gc.callbacks); at 10,000 it
    takes 0.5 % (0.17 s), and the resident size after 6,000 runs is level either way
    (179 vs 181 MB). The price is a longer pause when it does run, about every 200 runs:
    at most 16 ms, against 5 ms at the default.

    Once per process (a test session starts many apps); `serve` and `worker` both call it."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        young, older, oldest = gc.get_threshold()  # a graph module may have raised it
        gc.set_threshold(max(young, YOUNG_COLLECTION_THRESHOLD), older, oldest)


def load_custom_auth(settings: Settings) -> tuple[CustomAuth | None, dict[str, Any] | None]:
    """langgraph.json's `auth`: the loaded handlers (None without `auth.path`) and the
    `auth.openapi` security section. Raises CustomAuthError naming an unloadable path."""
    if settings.config_file is None:
        return None, None
    config = read_config(settings.config_file)
    if config.auth_path is None:
        return None, config.auth_openapi
    # the auth file may import the project's modules
    add_dependency_paths(config.base_dir, list(config.dependencies))
    custom = CustomAuth.load(
        config.auth_path, base_dir=config.base_dir, tenant_field=settings.auth_tenant_field
    )
    return custom, config.auth_openapi


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state: AppState = await open_state(settings, startup_steps())
        app.state.graphkeep = state
        tune_garbage_collector()
        try:
            yield
        finally:
            await state.close()

    app = FastAPI(
        title="graphkeep",
        version=__version__,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        # FastAPI's OpenTelemetry hooks: graphkeep exports Prometheus metrics and structured
        # logs instead, and otherwise every request pays for looking up unconfigured providers.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        # /docs and /redoc come from the package's own assets (app/api/docs.py), not a CDN
        openapi_url=OPENAPI_PATH,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    custom_auth, auth_openapi = load_custom_auth(settings)
    app.state.custom_auth = custom_auth
    install_error_handlers(app)
    install_openapi(app, auth_openapi)
    if custom_auth is not None:
        # innermost: the caller is known and the body checked when the handlers run
        app.add_middleware(CustomAuthzMiddleware, custom=custom_auth)
    # Inside auth (added before it): a caller is known before its body is read and checked.
    app.add_middleware(BoundaryCheckMiddleware)
    app.add_middleware(AllowHeaderMiddleware)
    install_auth(app, settings, custom_auth)
    # Around auth and routing: an exception that escaped becomes a JSON 500 on a connection
    # that stays open (Starlette's outermost handler re-raises, which closes it).
    app.add_middleware(ServerErrorGuard)
    # Added after auth, so they wrap it: every request (401s included) gets a request id in
    # its logs and is counted; ObservabilityMiddleware is outermost to time the whole request.
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(ObservabilityMiddleware)
    # Routes are matched in this order on every request: the busiest first. No two routers
    # share a path and method.
    mount_flat(
        app,
        [
            threads.router,
            store.router,
            runs.router,
            thread_stream.router,
            thread_protocol.router,
            thread_protocol_ws.router,
            assistants.router,
            crons.router,
            meta.router,
            ops.router,
        ],
    )
    install_protocols(app, settings)
    if settings.console == "on":
        install_console(app)
    # last: a browser's few requests, matched after the API's; `/` leads to the console if on
    install_docs(app, CONSOLE_PREFIX if settings.console == "on" else HOME_TARGET)
    # last: langgraph.json's `http` (custom app, disable_*, cors, ...) acts on all of the above
    install_http_options(app, settings)
    return app

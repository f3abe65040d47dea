"""graphkeep command line (`graphkeep --help` lists the commands).

The only place where Settings() reads the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics, redaction
from app.config import Settings
from app.db import migrate as migrations
from app.db.engine import create_engine
from app.errors import AppError, SchemaBehind
from app.logging import configure as configure_logging

Command = Callable[[argparse.Namespace, Settings], int]


def _on_engine(settings: Settings, body: Callable[[AsyncEngine], Awaitable[int]]) -> int:
    """Run an admin command's `body` on a pool-less engine: an AppError is one line on
    stderr and exit status 2, and the engine is disposed either way."""

    async def run() -> int:
        engine = create_engine(settings.database_url, null_pool=True)
        try:
            return await body(engine)
        except AppError as exc:
            print(f"graphkeep: {exc.detail}", file=sys.stderr)
            return 2
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _store_dims(settings: Settings) -> int | None:
    """`store.index.dims` of the graph config, if it has one (read, nothing imported)."""
    from app.graphs.config import read_config
    from app.graphs.registry import EXAMPLES_CONFIG

    try:
        index = read_config(settings.config_file or EXAMPLES_CONFIG).store_index
    except AppError:
        return None  # `serve` reports a bad config; migrating does not need it
    dims = index.get("dims") if index else None
    return dims if isinstance(dims, int) and not isinstance(dims, bool) else None


def _cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from app.store import pgvector

    wants_pgvector = settings.store_pgvector == "auto"
    dims = _store_dims(settings) if wants_pgvector else None

    async def run() -> None:
        engine = create_engine(settings.database_url, null_pool=True)
        try:
            await migrations.upgrade(engine)
            print(f"database at revision {await migrations.current_revision(engine)}")
            if wants_pgvector and engine.dialect.name == "postgresql":
                # the pgvector column and HNSW index live outside the Alembic history
                if await pgvector.ensure(engine, dims):
                    made = f", HNSW index for {dims} dims" if dims else ""
                    print(f"store: semantic search on pgvector{made}")
        finally:
            await engine.dispose()

    asyncio.run(run())
    return 0


class _DropStreamCuts(logging.Filter):
    """uvicorn logs every exception of an ASGI app as an error; the streams cut on purpose
    at shutdown (StreamInterrupted) are not errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        from app.runs.events import StreamInterrupted

        exc = record.exc_info[1] if record.exc_info else None
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return not isinstance(exc, StreamInterrupted)


def _draining_server(config: Any, app: Any) -> Any:
    """A uvicorn Server that, on SIGTERM / SIGINT, starts the workers' drain and ends this
    process's open streams at once (their clients reconnect elsewhere). Plain uvicorn would
    first wait for every open connection (an SSE stream lasts as long as its run), and only
    then run the lifespan shutdown that drains."""
    import uvicorn

    logging.getLogger("uvicorn.error").addFilter(_DropStreamCuts())

    class DrainingServer(uvicorn.Server):
        _gk_loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            state = getattr(app.state, "graphkeep", None)
            if self.started and state is not None and self.servers:
                from app.main import log_startup

                host, port = self.servers[0].sockets[0].getsockname()[:2]
                log_startup(state, str(host), int(port))

        async def serve(self, sockets: Any = None) -> None:
            self._gk_loop = asyncio.get_running_loop()
            await super().serve(sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            state = getattr(app.state, "graphkeep", None)
            hub = getattr(getattr(state, "runs", None), "hub", None)
            if hub is not None and self._gk_loop is not None:
                self._gk_loop.call_soon_threadsafe(hub.begin_shutdown)

    return DrainingServer(config)


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from app.auth.tokens import AuthConfigError
    from app.main import check_startup, create_app

    updates: dict[str, object] = {}
    if args.host is not None:
        updates["host"] = args.host
    if args.port is not None:
        updates["port"] = args.port
    if args.config is not None:
        updates["config_file"] = Path(args.config)
    if args.workers is not None:
        updates["workers"] = args.workers
    settings = settings.model_copy(update=updates)
    try:
        # Fail fast with one clear line (schema behind, bad langgraph.json entry) instead of
        # a lifespan traceback from uvicorn.
        asyncio.run(check_startup(settings))
    except AppError as exc:
        print(f"graphkeep: {exc.detail}", file=sys.stderr)
        return 2
    try:
        app = create_app(settings)
    except AuthConfigError as exc:  # e.g. an enabled JWT algorithm without its key
        print(f"graphkeep: {exc}", file=sys.stderr)
        return 2
    except AppError as exc:  # langgraph.json `http` (e.g. an `http.app` that cannot import)
        print(f"graphkeep: {exc.detail}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # app.logging.configure (in main) formats uvicorn's records too
        access_log=False,  # graphkeep.access logs each request with its ids instead
        timeout_graceful_shutdown=int(settings.drain_timeout_seconds) + 5,
    )
    server = _draining_server(config, app)
    try:
        server.run()
        if not server.started:
            return 3  # uvicorn's STARTUP_FAILURE; it logged why
    except SchemaBehind as exc:
        print(f"graphkeep: {exc.detail}", file=sys.stderr)
        return 2
    finally:
        metrics.mark_process_dead(os.getpid())  # multiprocess mode: drop this pid's gauges
    return 0


def _cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run workers only (no API): claim and execute runs until SIGTERM, then drain."""
    import signal

    from app.main import startup_steps, tune_garbage_collector
    from app.state import open_state

    updates: dict[str, object] = {}
    if args.config is not None:
        updates["config_file"] = Path(args.config)
    if args.concurrency is not None:
        updates["workers"] = args.concurrency
    settings = settings.model_copy(update=updates)
    if settings.workers < 1:
        print("graphkeep: worker needs --concurrency of at least 1", file=sys.stderr)
        return 2

    async def run() -> None:
        state = await open_state(settings, startup_steps())
        tune_garbage_collector()  # as `serve` does: the worker process executes the runs
        print(f"graphkeep: worker ready ({settings.workers} slots)", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        stop_metrics = None
        if settings.worker_metrics_port is not None:
            token = settings.metrics_token
            stop_metrics = metrics.start_http_server(
                settings.worker_metrics_port,
                settings.host,
                token=token.get_secret_value() if token is not None else None,
            )
        try:
            await stop.wait()
        finally:
            await state.close()  # drains: running graphs stop at a super-step boundary
            if stop_metrics is not None:
                stop_metrics()
            metrics.mark_process_dead(os.getpid())

    try:
        asyncio.run(run())
    except AppError as exc:
        print(f"graphkeep: {exc.detail}", file=sys.stderr)
        return 2
    return 0


def _cmd_openapi(args: argparse.Namespace, settings: Settings) -> int:
    from app.main import create_app

    spec = create_app(settings).openapi()
    text = json.dumps(spec, indent=2, sort_keys=True) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def _cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Report (or with --fix repair) stored text that cannot be read back; exit 1 when
    something unreadable is left."""
    from app.ops.doctor import run_doctor

    async def run() -> int:
        engine = create_engine(settings.database_url, null_pool=True)
        try:
            findings = await run_doctor(engine, fix=args.fix)
        finally:
            await engine.dispose()
        for finding in findings:
            print(finding.line())
        left = [f for f in findings if not f.fixed]
        fixed = len(findings) - len(left)
        print(f"doctor: {len(findings)} unreadable value(s), {fixed} fixed", file=sys.stderr)
        if left and not args.fix:
            print("doctor: run `graphkeep doctor --fix` to repair them", file=sys.stderr)
        return 1 if left else 0

    return asyncio.run(run())


def _cmd_apikey(args: argparse.Namespace, settings: Settings) -> int:
    from app.auth import apikeys
    from app.state import ensure_schema

    async def run(engine: AsyncEngine) -> int:
        await ensure_schema(engine, settings.database_url)
        if args.apikey_command == "create":
            info, key = await apikeys.create_api_key(
                engine,
                tenant_id=args.tenant,
                user_id=args.user,
                read_only=args.read_only,
                name=args.name,
            )
            print(f"key_id: {info.key_id}", file=sys.stderr)
            print(f"tenant: {info.tenant_id}  user: {info.user_id}", file=sys.stderr)
            print("the key is shown only once; store it now:", file=sys.stderr)
            print(key)
        elif args.apikey_command == "list":
            for k in await apikeys.list_api_keys(engine, tenant_id=args.tenant):
                state = f"revoked {k.revoked_at.isoformat()}" if k.revoked_at else "active"
                mode = "read-only" if k.read_only else "read-write"
                print(
                    f"{k.key_id}\t{k.tenant_id}\t{k.user_id}\t{mode}\t{state}\t"
                    f"{k.created_at.isoformat()}\t{k.name or ''}"
                )
        else:
            info = await apikeys.revoke_api_key(engine, key_id=args.key_id)
            print(f"revoked {info.key_id} (tenant {info.tenant_id})")
        return 0

    return _on_engine(settings, run)


def _cmd_store(args: argparse.Namespace, settings: Settings) -> int:
    """`graphkeep store reindex`: re-embed items after a change of model or fields."""
    from app.graphs.config import apply_environment, read_config
    from app.graphs.registry import EXAMPLES_CONFIG
    from app.state import ensure_keys, ensure_schema
    from app.store import SQLStore, parse_index_config, pgvector

    path = Path(args.config) if args.config else settings.config_file or EXAMPLES_CONFIG

    async def run(engine: AsyncEngine) -> int:
        await ensure_schema(engine, settings.database_url)
        await ensure_keys(engine, settings)  # Store values are sealed with a key
        config = await asyncio.to_thread(read_config, path)
        if not config.store_index:
            print(f"graphkeep: {path} has no store.index: nothing to embed", file=sys.stderr)
            return 2
        apply_environment(config)  # an embedder's API key may come from `env`
        index = await asyncio.to_thread(
            parse_index_config, config.store_index, base_dir=config.base_dir
        )
        if settings.store_pgvector == "auto":  # an HNSW index for a new `dims`
            await pgvector.ensure(engine, index.dims)
        count = await SQLStore(engine, index=index).reindex(batch_size=args.batch_size)
        print(f"re-embedded {count} items (model {index.model_id})")
        return 0

    return _on_engine(settings, run)


def _cmd_encryption(args: argparse.Namespace, settings: Settings) -> int:
    """`graphkeep encryption status | rotate` (app/ops/encryption.py)."""
    from app.db import sealed
    from app.ops import encryption
    from app.state import build_keyring, ensure_schema

    async def run(engine: AsyncEngine) -> int:
        await ensure_schema(engine, settings.database_url)
        keyring = build_keyring(settings)
        sealed.install(keyring)
        if args.encryption_command == "status":
            found = await encryption.status(engine)
            print(json.dumps(found.to_json(keyring.current), indent=2, sort_keys=True))
            return 0
        report = await encryption.rotate(
            engine,
            keyring,
            batch_size=args.batch_size,
            progress=lambda name, n: print(f"{name}: {n} rows re-sealed", file=sys.stderr),
        )
        print(json.dumps(report.to_json(), sort_keys=True))
        return 0

    return _on_engine(settings, run)


DESCRIPTION = """\
graphkeep: a self-hosted LangGraph Agent Server with durable persistence.

Settings come from GRAPHKEEP_* environment variables (see README, "Configuration"); the
options below override them for one command. Start with:

  graphkeep serve        embedded SQLite, the example graphs, http://127.0.0.1:8123/docs
"""


def _default(name: str) -> str:
    """`(default: $GRAPHKEEP_X or <built-in>)` for an option that overrides a setting."""
    field = Settings.model_fields[name]
    return f"(default: $GRAPHKEEP_{name.upper()} or {field.default})"


def build_parser() -> argparse.ArgumentParser:
    from app import __version__

    parser = argparse.ArgumentParser(
        prog="graphkeep",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="`graphkeep COMMAND --help` describes a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"graphkeep {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run the API (and in-process workers)",
        description="Run the HTTP API with in-process workers. Embedded SQLite is migrated "
        "on start; PostgreSQL must be migrated first (`graphkeep migrate`).",
    )
    serve.add_argument("--host", default=None, help=f"address to bind {_default('host')}")
    serve.add_argument("--port", type=int, default=None, help=f"port to bind {_default('port')}")
    serve.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="langgraph.json-compatible graph config "
        "(default: $GRAPHKEEP_CONFIG_FILE or the bundled example graphs)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"in-process worker tasks, 0 for an API-only process {_default('workers')}",
    )
    serve.set_defaults(func=_cmd_serve)

    worker = sub.add_parser("worker", help="run workers only (scale them apart from the API)")
    worker.add_argument("--config", default=None, help="langgraph.json-compatible file")
    worker.add_argument("--concurrency", type=int, default=None, help="runs executed at once")
    worker.set_defaults(func=_cmd_worker)

    mig = sub.add_parser(
        "migrate",
        help="upgrade the database schema to head (idempotent)",
        description="Upgrade the schema of $GRAPHKEEP_DATABASE_URL to the newest revision; "
        "running it again changes nothing. On PostgreSQL also sets up pgvector for the "
        "Store when $GRAPHKEEP_STORE_PGVECTOR is auto.",
    )
    mig.set_defaults(func=_cmd_migrate)

    oapi = sub.add_parser(
        "openapi",
        help="write the OpenAPI spec",
        description="Write the server's OpenAPI document as JSON.",
    )
    oapi.add_argument(
        "--output",
        "-o",
        default="openapi/openapi.json",
        metavar="FILE",
        help="where to write it; - for stdout (default: %(default)s)",
    )
    oapi.set_defaults(func=_cmd_openapi)

    doctor = sub.add_parser(
        "doctor", help="find (and --fix) stored text earlier versions kept unreadable"
    )
    doctor.add_argument("--fix", action="store_true", help="repair what it finds")
    doctor.set_defaults(func=_cmd_doctor)

    key = sub.add_parser("apikey", help="create, list and revoke API keys")
    key_sub = key.add_subparsers(dest="apikey_command", required=True)
    create = key_sub.add_parser("create", help="create a key and print it (once)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--user", default=None, help="user id (default: api-key:<key_id>)")
    create.add_argument("--read-only", action="store_true", help="the key cannot write")
    create.add_argument("--name", default=None, help="a label for `apikey list`")
    listing = key_sub.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--tenant", default=None, help="only this tenant's keys")
    revoke = key_sub.add_parser("revoke", help="revoke a key by its key_id")
    revoke.add_argument("key_id")
    key.set_defaults(func=_cmd_apikey)

    store = sub.add_parser("store", help="long-term memory maintenance")
    store_sub = store.add_subparsers(dest="store_command", required=True)
    reindex = store_sub.add_parser(
        "reindex", help="re-embed items whose vectors are missing, stale or of another model"
    )
    reindex.add_argument("--config", default=None, help="langgraph.json with store.index")
    reindex.add_argument("--batch-size", type=int, default=256, help="items per embed call")
    store.set_defaults(func=_cmd_store)

    enc = sub.add_parser("encryption", help="encryption at rest: key usage and rotation")
    enc_sub = enc.add_subparsers(dest="encryption_command", required=True)
    enc_sub.add_parser("status", help="rows each key id (or none: plaintext) still seals")
    rot = enc_sub.add_parser(
        "rotate", help="re-seal, online and in batches, every row not under the current key"
    )
    rot.add_argument("--batch-size", type=int, default=500, help="rows per transaction")
    enc.set_defaults(func=_cmd_encryption)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        # each field and reason, never the input: it may be a database URL with its password
        for error in exc.errors(include_input=False, include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "settings"
            print(f"graphkeep: invalid configuration: {where}: {error['msg']}", file=sys.stderr)
        return 2
    configure_logging(settings)
    redaction.install(redaction.Redactor(settings.redact_keys))
    func: Command = args.func
    return func(args, settings)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""graphkeep command line: serve | worker | migrate | openapi.

The only place where Settings() reads the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from app.config import Settings
from app.db import migrate as migrations
from app.db.engine import create_engine
from app.errors import SchemaBehind

Command = Callable[[argparse.Namespace, Settings], int]


def _cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    async def run() -> None:
        engine = create_engine(settings.database_url, null_pool=True)
        try:
            await migrations.upgrade(engine)
            print(f"database at revision {await migrations.current_revision(engine)}")
        finally:
            await engine.dispose()

    asyncio.run(run())
    return 0


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from app.main import create_app

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
    app = create_app(settings)
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            timeout_graceful_shutdown=int(settings.drain_timeout_seconds) + 5,
        )
    except SchemaBehind as exc:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphkeep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the API (and in-process workers)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--config", default=None, help="langgraph.json-compatible file")
    serve.add_argument("--workers", type=int, default=None, help="in-process worker tasks")
    serve.set_defaults(func=_cmd_serve)

    mig = sub.add_parser("migrate", help="upgrade the database schema to head (idempotent)")
    mig.set_defaults(func=_cmd_migrate)

    oapi = sub.add_parser("openapi", help="write the OpenAPI spec")
    oapi.add_argument("--output", "-o", default="openapi/openapi.json")
    oapi.set_defaults(func=_cmd_openapi)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    func: Command = args.func
    return func(args, settings)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

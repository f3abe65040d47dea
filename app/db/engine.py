"""One async engine factory for both dialects."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` and `sqlite:///` URLs and pick the async drivers."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql" and parsed.get_driver_name() != "asyncpg":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif backend == "sqlite" and parsed.get_driver_name() != "aiosqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    return parsed.render_as_string(hide_password=False)


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 10,
    timeout_seconds: float = 10.0,
    null_pool: bool = False,
) -> AsyncEngine:
    """Create the async engine; SQLite gets WAL, a busy timeout and foreign keys."""
    url = normalize_url(url)
    kwargs: dict[str, Any] = {}
    if is_sqlite(url):
        kwargs["connect_args"] = {"timeout": timeout_seconds}
        if null_pool:
            kwargs["poolclass"] = NullPool
    else:
        kwargs["connect_args"] = {
            "timeout": timeout_seconds,
            "command_timeout": max(timeout_seconds * 6, 60.0),
            "server_settings": {"application_name": "graphkeep"},
        }
        if null_pool:
            kwargs["poolclass"] = NullPool
        else:
            kwargs.update(
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=timeout_seconds,
                pool_pre_ping=True,
            )
    engine = create_async_engine(url, **kwargs)
    if is_sqlite(url):
        busy_ms = int(timeout_seconds * 1000)

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()
            # Take transaction control from the driver (SQLAlchemy's aiosqlite recipe).
            dbapi_conn.isolation_level = None

        @event.listens_for(engine.sync_engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # IMMEDIATE takes the write lock up front: two deferred transactions that both
            # upgrade from read to write deadlock at once, whatever busy_timeout says.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine

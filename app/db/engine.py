"""One async engine factory for both dialects."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.db.park import Park, park_limits
from app.db.types import storable_json


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def _in_memory(url: str) -> bool:
    """A SQLite database in memory (one connection, shared: nothing to park)."""
    return is_sqlite(url) and make_url(url).database in (None, "", ":memory:")


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` and `sqlite:///` URLs and pick the async drivers."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql" and parsed.get_driver_name() != "asyncpg":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif backend == "sqlite" and parsed.get_driver_name() != "aiosqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    return parsed.render_as_string(hide_password=False)


# Execution option: a SQLite connection that only reads may skip BEGIN IMMEDIATE; its
# statements then run in autocommit (the driver's transaction control is off), each reading a
# consistent WAL snapshot without taking the write lock. Never set it on a connection that
# writes more than one statement.
SQLITE_NO_BEGIN = "graphkeep_sqlite_no_begin"

# Engine execution option, set by `create_engine(autocommit=True)` on PostgreSQL: the
# engine's connections are in autocommit unless `app.db.access.transaction` asks for one.
AUTOCOMMIT_ENGINE = "graphkeep_autocommit_engine"
# Engine execution option of PostgreSQL engines with a pool: the `app.db.park.ParkLimits` of
# its capacity (the pool's size and overflow, which SQLAlchemy's pool does not tell).
PARK_LIMITS = "graphkeep_park_limits"
# Engine execution option, set by `create_engine(autocommit=True)` on either dialect (not in
# memory): the `app.db.park.Park` of connections `app.db.access.read` keeps checked out
# between reads. It lives with the engine (the domains are handed the engine), and its owner
# closes it before disposing of the engine: `app.db.access.close_engine`.
PARKED_READS = "graphkeep_parked_reads"

# SQLAlchemy's pool for a SQLite file: QueuePool's default size and overflow.
_SQLITE_FILE_POOL = (5, 10)

# A pooled connection idle longer than this is pinged before use.
PING_IDLE_SECONDS = 5.0


async def _close_connection(conn: AsyncConnection) -> None:
    await conn.close()


def _ping_idle_connections(engine: AsyncEngine, idle_seconds: float) -> None:
    """Pre-ping only connections that sat idle, instead of SQLAlchemy's `pool_pre_ping`.

    On asyncpg, `pool_pre_ping` wraps its ping in BEGIN / ROLLBACK (for pgbouncer): three
    round trips on every checkout, more than a Store get or a checkpoint read itself costs
    (measured in bench/store_bench.py). A connection used within `idle_seconds` is trusted; an
    older one is pinged and, if dead, replaced (DisconnectionError makes the pool retry). A
    connection that dies in between fails its statement, and SQLAlchemy then invalidates the
    whole pool on that disconnect error, so the next checkout reconnects.
    """
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "checkin")
    def _stamp(_dbapi_conn: Any, record: Any) -> None:
        record.info["graphkeep_last_used"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        last = record.info.get("graphkeep_last_used")
        if last is None or time.monotonic() - last < idle_seconds:
            return  # fresh from connect, or in use moments ago
        try:
            dbapi_conn.ping()
        except Exception as exc:
            if _timed_out(exc):
                # a stalled database, not a dead connection: reconnecting would only wait out
                # the connect timeout on top of this one; the request fails now (503) and the
                # pool drops the connection (its checkout failed)
                raise TimeoutError("the database did not answer an idle connection's ping") from exc
            raise DisconnectionError("stale pooled connection") from exc


def _drop_invalidated_at_once(engine: AsyncEngine) -> None:
    """A connection the pool invalidates (a failed or timed-out statement, a failed ping) is
    closed at once. SQLAlchemy's asyncpg adapter would first try a graceful close that waits up
    to 2 s for a database that may be the one not answering, so a request on a stalled
    database would wait its statement timeout plus those 2 s."""

    @event.listens_for(engine.sync_engine.pool, "invalidate")
    def _terminate(dbapi_conn: Any, _record: Any, _exc: Any) -> None:
        driver = getattr(dbapi_conn, "driver_connection", None)
        if driver is not None and not driver.is_closed():
            driver.terminate()  # asyncpg's public hard close: no round trip


def _timed_out(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is a timeout (the driver's command timeout)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def bounded_settings(timeout_seconds: float) -> dict[str, str]:
    """PostgreSQL session settings that bound every wait of a serving connection: a statement
    (lock waits included) is cancelled after `timeout_seconds`, a transaction left idle (a
    stalled client) is ended after twice that, and the server probes an idle connection's
    peer over TCP (keepalives) so a dead client's session - and its locks, the worker liveness
    lock among them - goes within seconds."""
    ms = str(max(1, int(timeout_seconds * 1000)))
    return {
        "statement_timeout": ms,
        "idle_in_transaction_session_timeout": str(max(1, int(timeout_seconds * 2000))),
        "tcp_keepalives_idle": "5",
        "tcp_keepalives_interval": "2",
        "tcp_keepalives_count": "3",
    }


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 10,
    timeout_seconds: float = 10.0,
    null_pool: bool = False,
    server_settings: Mapping[str, str] | None = None,
    bounded: bool = False,
    autocommit: bool = False,
) -> AsyncEngine:
    """Create the async engine; SQLite gets WAL, a busy timeout and foreign keys.

    `server_settings`: PostgreSQL settings every connection of the engine starts with.
    `bounded` (the serving engine): on PostgreSQL no statement waits longer than
    `timeout_seconds` (plus a second): see `bounded_settings`.
    `autocommit` (the serving engine): `app.db.access.read` parks a few connections between
    reads, on either dialect (`PARKED_READS`). On PostgreSQL every connection is in autocommit when
    checked out, and `app.db.access.transaction` switches one to the server's default
    isolation level for a transaction (reverted when it goes back to the pool). Most of the
    server's statements run alone (reads, single-statement writes); switching each of those
    connections to autocommit and back cost about 50 us of CPU per statement, a sixth of a
    one-row read. Use it only with `app.db.access` (a plain `engine.begin()` would not open a
    transaction on it), and dispose of it with `app.db.access.close_engine`.
    """
    url = normalize_url(url)
    kwargs: dict[str, Any] = {}
    if is_sqlite(url):
        kwargs["connect_args"] = {"timeout": timeout_seconds}
        if null_pool:
            kwargs["poolclass"] = NullPool
    else:
        settings = {"application_name": "graphkeep"}
        if bounded:
            settings.update(bounded_settings(timeout_seconds))
        kwargs["connect_args"] = {
            "timeout": timeout_seconds,
            # client side: a server that stopped answering on an open connection (frozen,
            # partitioned) cannot enforce its own timeouts
            "command_timeout": timeout_seconds + 1.0 if bounded else max(timeout_seconds * 6, 60.0),
            "server_settings": {**settings, **(server_settings or {})},
        }
        if null_pool:
            kwargs["poolclass"] = NullPool
        else:
            kwargs.update(
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=timeout_seconds,
            )
    # hide_parameters: SQLAlchemy's error messages (and so any log of them) never carry the
    # statement's bound values, which are the caller's data
    options: dict[str, Any] = {}
    if not null_pool and not _in_memory(url):
        # SQLite: SQLAlchemy's pool for a file (the serving engine's `pool_size` is
        # PostgreSQL's); its fast path keeps sizing itself from the pool (`fast_executor`)
        capacity = _SQLITE_FILE_POOL if is_sqlite(url) else (pool_size, max_overflow)
        limits = park_limits(*capacity, reads=autocommit)
        if not is_sqlite(url):
            options[PARK_LIMITS] = limits
        if autocommit:
            options[PARKED_READS] = Park[AsyncConnection](limits.reads, _close_connection)
    if autocommit and not is_sqlite(url):
        # SQLAlchemy applies an engine's isolation level on connect and restores it on
        # check-in; the execution option tells app.db.access the engine is such a one
        options[AUTOCOMMIT_ENGINE] = True
        kwargs["isolation_level"] = "AUTOCOMMIT"
    if options:
        kwargs["execution_options"] = options
    engine = create_async_engine(url, json_serializer=storable_json, hide_parameters=True, **kwargs)
    if not is_sqlite(url):
        _drop_invalidated_at_once(engine)
        if not null_pool:
            _ping_idle_connections(engine, PING_IDLE_SECONDS)
    if is_sqlite(url):
        busy_ms = int(timeout_seconds * 1000)

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
            # FULL: a commit that returned survives a power loss too (NORMAL in WAL mode may
            # roll the last commits back); nothing acknowledged may be lost.
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.close()
            # Take transaction control from the driver (SQLAlchemy's aiosqlite recipe).
            dbapi_conn.isolation_level = None

        @event.listens_for(engine.sync_engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            if conn.get_execution_options().get(SQLITE_NO_BEGIN):
                # opted-in reads: each statement is its own snapshot (WAL), no write lock
                return
            # IMMEDIATE takes the write lock up front: two deferred transactions that both
            # upgrade from read to write deadlock at once, whatever busy_timeout says.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine

"""Alembic environment (async template). The URL comes from the caller or GRAPHKEEP_DATABASE_URL."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from app.config import DEFAULT_DATABASE_URL
from app.db.engine import create_engine
from app.db.tables import metadata
from app.store.pgvector import include_object

config = context.config
target_metadata = metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=False,
        # the pgvector column and HNSW indexes made by the Store's setup are not drift
        include_object=include_object,
    )


def _run_sync(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run_sync)
            await conn.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    # A caller that already holds a (sync-facing) connection passes it in; see app.db.migrate.
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_sync(connection)
        return
    url = (
        config.attributes.get("url")
        or os.environ.get("GRAPHKEEP_DATABASE_URL")
        or DEFAULT_DATABASE_URL
    )
    asyncio.run(_run_async(url))


def run_migrations_offline() -> None:
    url = config.attributes.get("url") or os.environ.get("GRAPHKEEP_DATABASE_URL")
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

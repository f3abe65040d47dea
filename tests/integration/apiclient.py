"""An httpx client on the real app (lifespan run, real database), tables emptied afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from app.config import Settings
from app.main import create_app
from tests.conftest import truncate_all


@asynccontextmanager
async def api_client(db_url: str, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app on `db_url` with no run workers (these tests drive no runs)."""
    app = create_app(Settings(database_url=db_url, workers=0, **settings))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
                yield client
        finally:
            await truncate_all(app.state.graphkeep.engine)

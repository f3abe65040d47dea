"""Fixtures shared by the integration modules that drive runs through an in-process app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.main import create_app
from tests.conftest import truncate_all

GRAPHS = Path(__file__).resolve().parents[1] / "graphs" / "langgraph.json"


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[FastAPI]:
    """The app without workers, started with its lifespan; its tables emptied after."""
    app = create_app(Settings(database_url=db_url, workers=0))
    async with app.router.lifespan_context(app):
        try:
            yield app
        finally:
            await truncate_all(app.state.graphkeep.engine)


@pytest.fixture
async def make_client(db_url: str, engine: AsyncEngine) -> AsyncIterator[Any]:
    """`await make_client(**settings)`: an app with in-process workers on the test graphs
    (started with its lifespan), and an ASGI client for it; all closed at the end."""
    stack: list[Any] = []

    async def make(**overrides: Any) -> httpx.AsyncClient:
        options: dict[str, Any] = {"workers": 2, "log_level": "WARNING", **overrides}
        settings = Settings(database_url=db_url, config_file=GRAPHS, **options)
        app = create_app(settings)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30
        )
        stack.append((lifespan, client))
        return client

    yield make
    for lifespan, client in reversed(stack):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)

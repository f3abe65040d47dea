"""The app starts on real storage and answers the system endpoints."""

from __future__ import annotations

import httpx
import pytest

from app.config import Settings
from app.main import create_app


@pytest.fixture
async def client(db_url: str):
    app = create_app(Settings(database_url=db_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


async def test_ok_and_info(client: httpx.AsyncClient) -> None:
    assert (await client.get("/ok")).json()["ok"] is True
    info = (await client.get("/info")).json()
    assert info["flags"]["assistants"] is True
    assert info["langgraph_py_version"].startswith("1.2.")


async def test_unknown_route_is_json_404(client: httpx.AsyncClient) -> None:
    r = await client.get("/nope")
    assert r.status_code == 404
    assert r.json() == {"detail": "Not Found"}

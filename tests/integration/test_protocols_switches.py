"""MCP and A2A switch off by setting and by langgraph.json `http.disable_mcp` / `disable_a2a`,
and /info says which are on (in-process app, both dialects)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from app.config import Settings
from app.main import create_app

MCP_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
CARD = "/a2a/agent/.well-known/agent-card.json"


@asynccontextmanager
async def _client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


async def test_on_by_default(db_url: str) -> None:
    async with _client(Settings(database_url=db_url)) as client:
        flags = (await client.get("/info")).json()["flags"]
        assert flags["mcp"] is True and flags["a2a"] is True
        ping = await client.post("/mcp", json=MCP_PING, headers=MCP_HEADERS)
        assert ping.status_code == 200 and ping.json()["result"] == {}
        card = await client.get(CARD)
        assert card.status_code == 200 and card.json()["name"] == "agent"


async def test_settings_switch_off(db_url: str) -> None:
    settings = Settings(database_url=db_url, mcp_enabled=False, a2a_enabled=False)
    async with _client(settings) as client:
        flags = (await client.get("/info")).json()["flags"]
        assert flags["mcp"] is False and flags["a2a"] is False
        assert (await client.post("/mcp", json=MCP_PING, headers=MCP_HEADERS)).status_code == 404
        assert (await client.get(CARD)).status_code == 404
        assert (await client.post("/a2a/agent", json=MCP_PING)).status_code == 404


async def test_langgraph_json_switches_off(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": "app.examples.chat:graph"},
                "http": {"disable_mcp": True, "disable_a2a": True},
            }
        )
    )
    async with _client(Settings(database_url=db_url, config_file=config)) as client:
        flags = (await client.get("/info")).json()["flags"]
        assert flags["mcp"] is False and flags["a2a"] is False
        assert (await client.post("/mcp", json=MCP_PING, headers=MCP_HEADERS)).status_code == 404
        assert (await client.get(CARD)).status_code == 404
        assert (await client.get("/.well-known/agent-card.json")).status_code == 404
        assert (await client.post("/a2a/agent", json=MCP_PING)).status_code == 404

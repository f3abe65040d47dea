"""`install_protocols(app, settings)`: the /mcp and /a2a routes and the MCP session manager."""

from __future__ import annotations

from typing import Any, cast

from fastapi import FastAPI

from app.config import Settings
from app.protocols.a2a import A2A_PATH, CARD_NAME, A2AEndpoint, assistant_card, well_known_card
from app.protocols.mcp import MCP_PATH, MCPEndpoint, wrap_lifespan


def install_protocols(app: FastAPI, settings: Settings) -> None:
    """Mount what the settings switch on; langgraph.json's `http.disable_mcp` / `disable_a2a`
    are read per request (the file is loaded by the lifespan) and answer 404."""
    limit = settings.protocol_max_message_bytes
    if settings.mcp_enabled:
        endpoint = MCPEndpoint(max_body_bytes=limit)
        # an endpoint that is not a function is served as an ASGI app (every method)
        app.add_route(MCP_PATH, cast(Any, endpoint))
        app.router.lifespan_context = wrap_lifespan(app.router.lifespan_context, endpoint)
    if settings.a2a_enabled:
        rpc = A2AEndpoint(max_message_bytes=limit)
        app.add_route(A2A_PATH, rpc.__call__, methods=["POST"])
        app.add_route(f"{A2A_PATH}/{CARD_NAME}", assistant_card, methods=["GET"])
        app.add_route(f"/{CARD_NAME}", well_known_card, methods=["GET"])

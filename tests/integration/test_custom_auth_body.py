"""Custom auth reads the request body before the boundary check does (auth is the outer
middleware): an `@auth.authenticate` handler taking `body` gets None for a body it cannot
decode, nesting too deep for the parser included (a RecursionError there was a 500). That
body then meets the boundary check like any other: a 4xx, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from app.config import Settings
from app.main import create_app

AUTH = """
from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None, body: object) -> dict:
    return {"identity": "alice", "permissions": []}
"""


async def test_authenticate_with_body_survives_a_body_too_deep_to_parse(
    db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "body_auth.py").write_text(AUTH)
    config = {
        "graphs": {"agent": "app.examples.chat:graph"},
        "auth": {"path": "./body_auth.py:auth"},
    }
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    app = create_app(Settings(database_url=db_url, config_file=tmp_path / "langgraph.json"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            ok = await client.post("/threads/search", json={"limit": 1})
            assert ok.status_code == 200, ok.text
            deep = b'{"metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}"
            json_type = {"content-type": "application/json"}
            r = await client.post("/threads", content=deep, headers=json_type)
            assert r.status_code == 422, r.text  # a 500 before: RecursionError in auth
            assert r.json() == {"detail": "body: nested deeper than 100 levels"}
            r = await client.post("/threads/count", json={})
            assert r.status_code == 200 and r.json() == 0  # nothing was written

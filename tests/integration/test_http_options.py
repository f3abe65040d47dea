"""langgraph.json `http` options on the real app (in-process ASGI, both dialects): a custom
`http.app` (precedence, middleware order, custom-route auth, lifespan), every `disable_*`
switch (route gone from the app and from /openapi.json, /info flags), CORS, configurable
headers reaching a graph, logged headers, mount_prefix and the webhook URL policy. The live
server with the official SDK: tests/e2e/test_http_options_sdk.py."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.graphs.config import GraphConfigError
from app.main import create_app
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.integration.http_app import custom

HERE = Path(__file__).resolve().parent / "http_app"
CUSTOM_APP = "tests.integration.http_app.custom:app"  # the module this test imports
GRAPHS = {
    "agent": "app.examples.chat:graph",
    "headers": str(HERE / "headers_graph.py") + ":graph",
}


def _config(tmp_path: Path, http: dict[str, Any] | None = None, **extra: Any) -> Path:
    path = tmp_path / "langgraph.json"
    body: dict[str, Any] = {"graphs": GRAPHS, **extra}
    if http is not None:
        body["http"] = http
    path.write_text(json.dumps(body))
    return path


def _jwt(db_url: str, config: Path, **kw: Any) -> Settings:
    return Settings(
        database_url=db_url,
        config_file=config,
        auth="jwt",
        jwt_secret=HS_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        log_level="WARNING",
        **kw,
    )


@asynccontextmanager
async def _client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


def _alice() -> dict[str, str]:
    """Made when used: a token made at import would expire before a long suite gets here."""
    return bearer(hs_token(claims(tenant="acme", sub="alice")))


async def test_custom_routes_are_public_and_win_over_built_ins(db_url: str, tmp_path: Path) -> None:
    config = _config(tmp_path, {"app": CUSTOM_APP})
    started = custom.LIFESPAN["started"]
    async with _client(_jwt(db_url, config)) as client:
        assert custom.LIFESPAN["started"] == started + 1  # its lifespan runs inside ours
        hello = await client.get("/custom/hello")  # no credentials: public by default
        assert hello.status_code == 200 and hello.json() == {"hello": "world", "tenant": None}
        assert (await client.get("/info")).json() == {"custom": True}  # custom wins
        # built-in routes keep graphkeep's auth, and the custom middleware wraps them too
        denied = await client.get("/threads/00000000-0000-0000-0000-000000000000")
        assert denied.status_code == 401 and denied.headers["x-custom-mw"] == "1"
        ok = await client.post("/threads/search", json={}, headers=_alice())
        assert ok.status_code == 200 and ok.headers["x-custom-mw"] == "1"
        # middleware_first (the default): the custom middleware runs before auth
        assert ok.headers["x-saw-principal"] == "no"
        # a custom path with another method is not public: it goes through auth
        assert (await client.post("/custom/hello")).status_code == 401
        spec = (await client.get("/openapi.json", headers=_alice())).json()
        assert "/custom/hello" in spec["paths"]  # its FastAPI routes are documented
    assert custom.LIFESPAN["stopped"] >= 1


async def test_custom_route_auth_and_auth_first(db_url: str, tmp_path: Path) -> None:
    http = {"app": CUSTOM_APP, "enable_custom_route_auth": True, "middleware_order": "auth_first"}
    async with _client(_jwt(db_url, _config(tmp_path, http))) as client:
        anonymous = await client.get("/custom/hello")
        assert anonymous.status_code == 401
        # auth_first: a request auth refused never reaches the custom middleware
        assert "x-custom-mw" not in anonymous.headers
        signed = await client.get("/custom/hello", headers=_alice())
        assert signed.status_code == 200 and signed.json()["tenant"] == "acme"
        assert signed.headers["x-saw-principal"] == "yes"  # auth ran first
        threads = await client.post("/threads/search", json={}, headers=_alice())
        assert threads.status_code == 200 and threads.headers["x-saw-principal"] == "yes"


@pytest.mark.parametrize(
    ("switch", "gone", "kept", "flag"),
    [
        ("disable_assistants", ("POST", "/assistants/search"), ("GET", "/ok"), "assistants"),
        ("disable_threads", ("POST", "/threads/search"), ("POST", "/runs/crons/search"), None),
        ("disable_runs", ("POST", "/runs/wait"), ("POST", "/threads/search"), "crons"),
        ("disable_store", ("POST", "/store/items/search"), ("POST", "/threads/search"), None),
    ],
)
async def test_each_disable_switch_removes_its_routes(
    db_url: str,
    tmp_path: Path,
    switch: str,
    gone: tuple[str, str],
    kept: tuple[str, str],
    flag: str | None,
) -> None:
    settings = Settings(database_url=db_url, config_file=_config(tmp_path, {switch: True}))
    async with _client(settings) as client:
        spec = (await client.get("/openapi.json")).json()
        body = {} if gone[0] == "POST" else None
        assert (await client.request(gone[0], gone[1], json=body)).status_code in (404, 405)
        assert gone[1] not in spec["paths"]
        assert (await client.request(kept[0], kept[1], json=body)).status_code == 200
        assert kept[1] in spec["paths"]
        if flag is not None:
            assert (await client.get("/info")).json()["flags"][flag] is False


async def test_threads_and_runs_switches_split_as_the_official_groups(
    db_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=db_url, config_file=_config(tmp_path, {"disable_threads": True})
    )
    async with _client(settings) as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/threads/{thread_id}/runs" in paths and "/threads/{thread_id}" not in paths
    assert not any(p.startswith("/threads") and "/runs" not in p for p in paths)


async def test_disable_meta_keeps_ok(db_url: str, tmp_path: Path) -> None:
    settings = Settings(database_url=db_url, config_file=_config(tmp_path, {"disable_meta": True}))
    async with _client(settings) as client:
        assert (await client.get("/ok")).status_code == 200
        for path in ("/info", "/openapi.json", "/docs", "/metrics", "/redoc"):
            assert (await client.get(path)).status_code == 404, path
        assert (await client.post("/threads/search", json={})).status_code == 200


async def test_disable_ui_and_webhooks_flags_are_accepted(db_url: str, tmp_path: Path) -> None:
    http = {"disable_ui": True, "disable_webhooks": True}
    async with _client(Settings(database_url=db_url, config_file=_config(tmp_path, http))) as c:
        assert (await c.get("/ui/agent")).status_code == 404
        assert (await c.get("/info")).json()["flags"]["assistants"] is True


CORS = {
    "allow_origins": ["https://app.example"],
    "allow_methods": ["GET", "POST"],
    "allow_headers": ["content-type", "authorization"],
    "allow_credentials": True,
    "expose_headers": ["x-pagination-total"],
    "max_age": 123,
}


async def test_cors_preflight_and_refusal(db_url: str, tmp_path: Path) -> None:
    config = _config(tmp_path, {"cors": CORS})
    # the file's rules replace GRAPHKEEP_CORS_ORIGINS (one CORS layer, not two)
    async with _client(_jwt(db_url, config, cors_origins=["https://other.example"])) as client:
        preflight = await client.options(
            "/threads/search",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert preflight.headers["access-control-max-age"] == "123"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        refused = await client.options(
            "/threads/search",
            headers={"Origin": "https://other.example", "Access-Control-Request-Method": "POST"},
        )
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        # a 401 still carries CORS headers, so the browser can read it
        denied = await client.get("/threads", headers={"Origin": "https://app.example"})
        assert denied.status_code in (401, 405)
        assert denied.headers["access-control-allow-origin"] == "https://app.example"
        assert denied.headers["access-control-expose-headers"] == "x-pagination-total"


async def test_cors_origin_regex(db_url: str, tmp_path: Path) -> None:
    config = _config(tmp_path, {"cors": {"allow_origin_regex": r"^https://.*\.corp\.example$"}})
    async with _client(Settings(database_url=db_url, config_file=config)) as client:
        hit = await client.get("/ok", headers={"Origin": "https://a.corp.example"})
        miss = await client.get("/ok", headers={"Origin": "https://corp.example.evil"})
    assert hit.headers["access-control-allow-origin"] == "https://a.corp.example"
    assert "access-control-allow-origin" not in miss.headers


async def _seen(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "/runs/wait", json={"assistant_id": "headers", "input": {}}, headers=headers
    )
    assert response.status_code == 200, response.text
    seen: dict[str, Any] = response.json()["seen"]
    return seen


SENT = {
    "x-team": "blue",
    "x-configurable-mode": "fast",
    "x-internal-trace": "t1",
    "user-agent": "probe/1",
    "x-api-key": "gk_not_a_real_key",
    "x-session-token": "secret-ish",
    "accept-language": "fr",
}


async def test_configurable_headers_default(db_url: str, tmp_path: Path) -> None:
    settings = Settings(database_url=db_url, config_file=_config(tmp_path), workers=1)
    async with _client(settings) as client:
        seen = await _seen(client, SENT)
    # the official default: x-* and user-agent; never credentials
    assert seen["x-team"] == "blue" and seen["user-agent"] == "probe/1"
    assert "x-api-key" not in seen and "x-session-token" not in seen
    assert "accept-language" not in seen


async def test_configurable_headers_patterns_reach_the_graph(db_url: str, tmp_path: Path) -> None:
    http = {
        "configurable_headers": {
            "includes": ["x-configurable-*", "x-internal-*", "accept-language", "x-api-key"],
            "excludes": ["x-internal-*"],
        }
    }
    settings = Settings(database_url=db_url, config_file=_config(tmp_path, http), workers=1)
    async with _client(settings) as client:
        seen = await _seen(client, SENT)
    assert seen["x-configurable-mode"] == "fast" and seen["accept-language"] == "fr"
    assert "x-internal-trace" not in seen  # excludes win
    assert "x-team" not in seen and "user-agent" not in seen  # not included
    assert "x-api-key" not in seen  # a credential is never copied, even when listed


async def test_logging_headers_in_the_access_log(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    http = {"logging_headers": {"includes": ["x-request-source", "authorization", "x-*"]}}
    settings = Settings(database_url=db_url, config_file=_config(tmp_path, http))
    async with _client(settings) as client:
        with caplog.at_level(logging.INFO, logger="graphkeep.access"):
            await client.get(
                "/ok",
                headers={
                    "x-request-source": "cli",
                    "authorization": "Bearer not-logged",
                    "x-auth-token": "not-logged-either",
                    "user-agent": "probe/1",
                },
            )
    records = [r for r in caplog.records if r.name == "graphkeep.access"]
    logged = records[-1].__dict__["headers"]
    assert logged == {"x-request-source": "cli"}
    assert "not-logged" not in caplog.text


async def test_no_headers_logged_by_default(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(database_url=db_url, config_file=_config(tmp_path))
    async with _client(settings) as client:
        with caplog.at_level(logging.INFO, logger="graphkeep.access"):
            await client.get("/ok", headers={"x-request-source": "cli"})
    records = [r for r in caplog.records if r.name == "graphkeep.access"]
    assert records and "headers" not in records[-1].__dict__


async def test_mount_prefix(db_url: str, tmp_path: Path) -> None:
    config = _config(tmp_path, {"mount_prefix": "/api", "app": CUSTOM_APP})
    async with _client(Settings(database_url=db_url, config_file=config)) as client:
        assert (await client.get("/api/ok")).json() == {"ok": True}
        assert (await client.post("/api/threads/search", json={})).status_code == 200
        assert (await client.get("/api/custom/hello")).status_code == 200
        outside = await client.get("/ok")
        assert outside.status_code == 404 and "/api" in outside.json()["detail"]


async def test_webhook_url_policy_refuses_at_creation(db_url: str, tmp_path: Path) -> None:
    webhooks = {"url": {"require_https": True, "allowed_domains": ["*.hooks.example"]}}
    config = _config(tmp_path, webhooks=webhooks)
    async with _client(Settings(database_url=db_url, config_file=config, workers=0)) as client:
        for url, why in [
            ("http://a.hooks.example/x", "https"),
            ("https://hooks.example/x", "allowed domains"),  # the apex is not a subdomain
            ("https://evil.example/x", "allowed domains"),
        ]:
            body = {"assistant_id": "agent", "input": {}, "webhook": url}
            refused = await client.post("/runs", json=body)
            assert refused.status_code == 422 and why in refused.text, refused.text
        count = await client.post("/threads/count", json={})
        assert count.json() == 0  # nothing was written
        ok = await client.post(
            "/runs",
            json={"assistant_id": "agent", "input": {}, "webhook": "https://a.hooks.example/x"},
        )
        assert ok.status_code == 200, ok.text


def test_unimportable_custom_app_stops_start_up_naming_it(tmp_path: Path) -> None:
    config = _config(tmp_path, {"app": "./missing.py:app"})
    with pytest.raises(GraphConfigError, match=r"`http\.app` './missing\.py:app'.*not found"):
        create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", config_file=config))
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    config = _config(tmp_path, {"app": "./broken.py:app"})
    with pytest.raises(GraphConfigError, match=r"broken\.py:app.*RuntimeError: boom"):
        create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", config_file=config))
    (tmp_path / "notapp.py").write_text("app = 42\n")
    config = _config(tmp_path, {"app": "./notapp.py:app"})
    with pytest.raises(GraphConfigError, match="not a Starlette or FastAPI app"):
        create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", config_file=config))


@pytest.fixture
def hook_receiver() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A real HTTP receiver on loopback; keeps each request's headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", seen
    server.shutdown()
    server.server_close()


async def _until(check: Any, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_webhook_headers_and_disable_webhooks(
    db_url: str,
    tmp_path: Path,
    hook_receiver: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, seen = hook_receiver
    monkeypatch.setenv("LG_WEBHOOK_TOKEN", "tok-123")
    webhooks = {"headers": {"X-Hook-Auth": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "X-Static": "s"}}
    config = _config(tmp_path, webhooks=webhooks)
    run = {"assistant_id": "agent", "input": {}, "webhook": url}
    async with _client(Settings(database_url=db_url, config_file=config, workers=1)) as client:
        assert (await client.post("/runs/wait", json=run)).status_code == 200
        await _until(lambda: len(seen) == 1)
    assert seen[0]["x-hook-auth"] == "Bearer tok-123" and seen[0]["x-static"] == "s"
    assert seen[0]["content-type"] == "application/json"

    off = _config(tmp_path, {"disable_webhooks": True})
    async with _client(Settings(database_url=db_url, config_file=off, workers=1)) as client:
        assert (await client.post("/runs/wait", json=run)).status_code == 200
        await asyncio.sleep(0.5)  # a webhook would be out by now (the first one took less)
    assert len(seen) == 1  # the run executed, no webhook was sent

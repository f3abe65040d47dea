"""Auth over real HTTP (ASGI): modes, 401/403 bodies, API keys, secrets, CORS, /metrics."""

from __future__ import annotations

import logging
import random
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app import metrics
from app.api.deps import PrincipalDep
from app.auth.apikeys import create_api_key, revoke_api_key
from app.config import Settings
from app.main import create_app
from tests.authkit import (
    AUDIENCE,
    HS_SECRET,
    ISSUER,
    bearer,
    claims,
    hmac_forged_token,
    hs_token,
    rsa_keypair,
    unsigned_token,
)
from tests.conftest import truncate_all

LANGSMITH_LIKE_KEY = "lsv2_pt_0123456789abcdef0123456789abcdef_0123456789"


def jwt_settings(db_url: str, **kw: Any) -> Settings:
    return Settings(
        database_url=db_url,
        auth="jwt",
        jwt_secret=HS_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        **kw,
    )


def add_probe_routes(app: FastAPI) -> None:
    """Tiny routes standing in for resources: one read, writes, and a read-like POST."""

    @app.get("/probe/whoami")
    async def whoami(principal: PrincipalDep) -> dict[str, Any]:
        return {
            "tenant_id": principal.tenant_id,
            "user_id": principal.user_id,
            "read_only": principal.read_only,
            "kind": principal.kind,
        }

    @app.post("/probe/things")
    async def create_thing(principal: PrincipalDep) -> dict[str, str]:
        return {"created_by": principal.user_id}

    @app.post("/probe/things/search")
    async def search_things(principal: PrincipalDep) -> list[str]:
        return []

    @app.delete("/probe/things/{thing_id}")
    async def delete_thing(thing_id: str, principal: PrincipalDep) -> dict[str, str]:
        return {"deleted": thing_id}


async def _client(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    add_probe_routes(app)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            try:
                yield app, c
            finally:
                await truncate_all(app.state.graphkeep.engine)


@pytest.fixture
async def jwt_client(db_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async for pair in _client(jwt_settings(db_url)):
        yield pair


@pytest.fixture
async def sqlite_jwt_client(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for _, c in _client(jwt_settings(sqlite_url)):
        yield c


def assert_401(r: httpx.Response, *secrets: str) -> None:
    assert r.status_code == 401, r.text
    body = r.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    for secret in secrets:
        assert secret not in r.text
        assert secret not in str(r.headers)


# ------------------------------------------------------------------------------ mode none


async def test_mode_none_is_anonymous_default_and_ignores_credentials(sqlite_url: str) -> None:
    async for _, c in _client(Settings(database_url=sqlite_url)):
        for headers in (
            {},
            {"x-api-key": LANGSMITH_LIKE_KEY},
            {"Authorization": "Bearer garbage"},
        ):
            r = await c.get("/probe/whoami", headers=headers)
            assert r.status_code == 200, r.text
            assert r.json() == {
                "tenant_id": "default",
                "user_id": "anonymous",
                "read_only": False,
                "kind": "anonymous",
            }
        assert (await c.post("/probe/things")).status_code == 200


# ------------------------------------------------------------------------------ JWT


async def test_public_paths_need_no_credentials(sqlite_jwt_client: httpx.AsyncClient) -> None:
    for path in ("/ok", "/info", "/openapi.json", "/docs"):
        r = await sqlite_jwt_client.get(path)
        assert r.status_code == 200, (path, r.status_code)


async def test_missing_and_malformed_credentials_are_401(
    sqlite_jwt_client: httpx.AsyncClient,
) -> None:
    c = sqlite_jwt_client
    missing = await c.get("/probe/whoami")
    assert_401(missing)
    assert missing.headers["www-authenticate"] == 'Bearer realm="graphkeep"'
    invalid = await c.get("/probe/whoami", headers=bearer("bogus"))
    assert 'error="invalid_token"' in invalid.headers["www-authenticate"]
    assert_401(await c.post("/probe/things"))
    assert_401(await c.get("/no/such/route"))  # no hint about which routes exist
    assert_401(await c.get("/probe/whoami", headers={"Authorization": "Basic dXNlcjpwYXNz"}))
    assert_401(await c.get("/probe/whoami", headers={"Authorization": "Bearer "}))


async def test_valid_token_identifies_tenant_and_user(
    sqlite_jwt_client: httpx.AsyncClient,
) -> None:
    r = await sqlite_jwt_client.get(
        "/probe/whoami", headers=bearer(hs_token(claims(tenant="acme", sub="alice")))
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"tenant_id": "acme", "user_id": "alice", "read_only": False, "kind": "jwt"}


BAD_TOKENS = {
    "expired": lambda: hs_token(claims(exp=int(time.time()) - 3600)),
    "not-yet-valid": lambda: hs_token(claims(nbf=int(time.time()) + 3600)),
    "wrong-issuer": lambda: hs_token(claims(iss="https://evil.test")),
    "wrong-audience": lambda: hs_token(claims(aud="other")),
    "bad-signature": lambda: hs_token(claims(), secret="not-the-server-secret-0123456789"),
    "alg-none": lambda: unsigned_token(claims()),
    "rsa-public-key-as-hmac-secret": lambda: hmac_forged_token(claims(), rsa_keypair()[1].encode()),
    "missing-tenant": lambda: hs_token(claims(tenant=None)),
    "garbage": lambda: "eyJnotreally.Zm9vYmFyYmF6cXV4.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
}


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
async def test_bad_tokens_are_401_and_never_echoed(
    kind: str, sqlite_jwt_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    token = BAD_TOKENS[kind]()
    with caplog.at_level(logging.DEBUG):
        r = await sqlite_jwt_client.get("/probe/whoami", headers=bearer(token))
    assert_401(r, token, token.split(".")[-1] or token)
    assert token not in caplog.text


async def test_read_only_scope_cannot_write(sqlite_jwt_client: httpx.AsyncClient) -> None:
    c = sqlite_jwt_client
    ro = bearer(hs_token(claims(scope="read")))
    rw = bearer(hs_token(claims(scope="read write")))
    assert (await c.get("/probe/whoami", headers=ro)).json()["read_only"] is True
    for method, path in (("POST", "/probe/things"), ("DELETE", "/probe/things/1")):
        r = await c.request(method, path, headers=ro)
        assert r.status_code == 403, r.text
        assert isinstance(r.json()["detail"], str)
        assert (await c.request(method, path, headers=rw)).status_code == 200
    assert (await c.post("/probe/things/search", headers=ro)).status_code == 200


# ------------------------------------------------------------------------------ API keys


async def test_api_keys_map_to_tenant_and_user_and_can_be_revoked(
    jwt_client: tuple[FastAPI, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    app, c = jwt_client
    engine = app.state.graphkeep.engine
    info, key = await create_api_key(engine, tenant_id="acme", user_id="bot", name="ci")
    assert key.startswith("gk_") and len(key) > 40
    with caplog.at_level(logging.DEBUG):
        for headers in ({"x-api-key": key}, bearer(key)):
            r = await c.get("/probe/whoami", headers=headers)
            assert r.status_code == 200, r.text
            assert r.json() == {
                "tenant_id": "acme",
                "user_id": "bot",
                "read_only": False,
                "kind": "api_key",
            }
        # a valid Authorization wins over an unrelated x-api-key the SDK adds from the env
        r = await c.get(
            "/probe/whoami",
            headers={**bearer(hs_token(claims(tenant="t2"))), "x-api-key": LANGSMITH_LIKE_KEY},
        )
        assert r.json()["tenant_id"] == "t2"
        assert_401(await c.get("/probe/whoami", headers={"x-api-key": LANGSMITH_LIKE_KEY}))
        assert_401(await c.get("/probe/whoami", headers={"x-api-key": key + "x"}))
        await revoke_api_key(engine, key_id=info.key_id)
        assert_401(await c.get("/probe/whoami", headers={"x-api-key": key}), key)
        assert_401(await c.get("/probe/whoami", headers=bearer(key)), key)
    assert key not in caplog.text


async def test_read_only_api_key_cannot_write(
    jwt_client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = jwt_client
    _, key = await create_api_key(app.state.graphkeep.engine, tenant_id="acme", read_only=True)
    headers = {"x-api-key": key}
    assert (await c.get("/probe/whoami", headers=headers)).json()["read_only"] is True
    assert (await c.post("/probe/things", headers=headers)).status_code == 403
    assert (await c.delete("/probe/things/1", headers=headers)).status_code == 403
    assert (await c.post("/probe/things/search", headers=headers)).status_code == 200


# ------------------------------------------------------------------------------ CORS, metrics


async def test_cors_is_off_by_default(sqlite_jwt_client: httpx.AsyncClient) -> None:
    r = await sqlite_jwt_client.get("/ok", headers={"Origin": "https://ui.test"})
    assert "access-control-allow-origin" not in r.headers


async def test_cors_origins_are_configurable(sqlite_url: str) -> None:
    settings = jwt_settings(sqlite_url, cors_origins=["https://ui.test"])
    async for _, c in _client(settings):
        pre = await c.options(
            "/threads/search",
            headers={
                "Origin": "https://ui.test",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "https://ui.test"
        r = await c.get(
            "/probe/whoami", headers={"Origin": "https://ui.test", **bearer(hs_token(claims()))}
        )
        exposed = {h.strip() for h in r.headers["access-control-expose-headers"].split(",")}
        assert {"x-pagination-total", "x-pagination-next", "content-location"} <= exposed
        # a 401 still carries CORS headers, so a browser can read the error
        denied = await c.get("/probe/whoami", headers={"Origin": "https://ui.test"})
        assert denied.status_code == 401
        assert denied.headers["access-control-allow-origin"] == "https://ui.test"
        other = await c.get("/ok", headers={"Origin": "https://evil.test"})
        assert "access-control-allow-origin" not in other.headers


async def test_metrics_token(sqlite_url: str) -> None:
    token = "metrics-token-0123456789"
    async for _, c in _client(Settings(database_url=sqlite_url, metrics_token=token)):
        r = await c.get("/metrics")
        assert r.status_code == 401 and r.json()["detail"]
        r = await c.get("/metrics", headers=bearer("wrong-token"))
        assert r.status_code == 401 and "wrong-token" not in r.text
        r = await c.get("/metrics", headers=bearer(token))
        assert r.status_code == 200 and token not in r.text
    async for _, c in _client(Settings(database_url=sqlite_url)):
        assert (await c.get("/metrics")).status_code == 200


def test_worker_metrics_server_requires_the_token() -> None:
    """`graphkeep worker`'s own /metrics port honours GRAPHKEEP_METRICS_TOKEN too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "worker-metrics-token-0123"
    stop = metrics.start_http_server(port, "127.0.0.1", token=token)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        assert httpx.get(url, timeout=5).status_code == 401
        assert httpx.get(url, headers=bearer("wrong"), timeout=5).status_code == 401
        ok = httpx.get(url, headers=bearer(token), timeout=5)
        assert ok.status_code == 200 and "graphkeep" in ok.text and token not in ok.text
    finally:
        stop()


async def test_junk_credentials_never_cause_a_500(sqlite_jwt_client: httpx.AsyncClient) -> None:
    """Deterministic fuzz: random and mutated credentials always get a JSON 401."""
    rng = random.Random(6)
    good = hs_token(claims())
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.=+/ "
    values = ["", " ", ".", "..", "gk_", "Bearer", "eyJ.eyJ.", good[:-1], good + "."]
    for _ in range(150):
        chars = list(good)
        for _ in range(rng.randint(1, 5)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        values.append("".join(chars))
        values.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))))
    for value in values:
        for headers in ({"Authorization": f"Bearer {value}"}, {"x-api-key": value or "x"}):
            r = await sqlite_jwt_client.get("/probe/whoami", headers=headers)
            if r.status_code == 200:  # a mutation that kept the signature valid (e.g. padding)
                assert r.json()["tenant_id"] == "acme"
                continue
            assert r.status_code == 401, (value, r.status_code, r.text)
            assert isinstance(r.json()["detail"], str)

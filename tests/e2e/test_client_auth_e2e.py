"""graphkeep_client's auth against a live `graphkeep serve` in JWT mode (SQLite temp file):
bearer tokens (fixed or fresh per request), API keys (x-api-key), and the typed 401/403/404."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from graphkeep_client import AsyncClient, Client, Forbidden, NotFound, Unauthorized
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, claims, hs_token
from tests.e2e.runs_server import ROOT, serve

pytestmark = pytest.mark.e2e


@dataclass
class AuthServer:
    url: str
    env: dict[str, str]

    def api_key(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "apikey", "create", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    tmp = tmp_path_factory.mktemp("client_auth_e2e")
    db_url = f"sqlite+aiosqlite:///{tmp / 'auth.db'}"
    env = {
        "GRAPHKEEP_CONFIG_FILE": str(ROOT / "app" / "examples" / "langgraph.json"),
        "GRAPHKEEP_AUTH": "jwt",
        "GRAPHKEEP_JWT_SECRET": HS_SECRET,
        "GRAPHKEEP_JWT_ISSUER": ISSUER,
        "GRAPHKEEP_JWT_AUDIENCE": AUDIENCE,
    }
    with serve(db_url, tmp, workers=1, env=env, name="auth") as proc:
        assert proc.url is not None
        base = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
        yield AuthServer(proc.url, base | env | {"GRAPHKEEP_DATABASE_URL": db_url})


def test_no_credentials_is_unauthorized(server: AuthServer) -> None:
    with Client(server.url) as client:
        assert client.health().ok  # /ok needs no auth
        with pytest.raises(Unauthorized) as info:
            client.threads.create()
    assert info.value.status == 401 and info.value.detail


def test_token_callable_is_asked_for_every_request(server: AuthServer) -> None:
    issued: list[str] = []

    def fresh_token() -> str:
        issued.append(hs_token(claims(tenant="client-e2e-a", sub="alice")))
        return issued[-1]

    with Client(server.url, token=fresh_token) as client:
        thread = client.threads.create(metadata={"who": "alice"})
        assert client.threads.get(thread.thread_id).metadata["who"] == "alice"
        assert len(issued) == 2

    # Another tenant cannot see it: answered like a missing thread.
    other = hs_token(claims(tenant="client-e2e-b", sub="bob"))
    with Client(server.url, token=other) as client, pytest.raises(NotFound):
        client.threads.get(thread.thread_id)


async def test_async_client_with_async_token_and_run(server: AuthServer) -> None:
    async def token() -> str:
        return hs_token(claims(tenant="client-e2e-async", sub="carol"))

    async with AsyncClient(server.url, token=token) as client:
        thread = await client.threads.create()
        paused = await client.runs.wait(thread.thread_id, "approval", input={"request": "x"})
        assert paused["__interrupt__"]
        done = await client.runs.wait(thread.thread_id, "approval", command={"resume": False})
        assert done["result"] == "rejected"


def test_api_keys_and_read_only_keys(server: AuthServer) -> None:
    key = server.api_key("--tenant", "client-e2e-keys", "--user", "dave")
    with Client(server.url, api_key=key) as client:
        thread = client.threads.create(metadata={"via": "key"})
        assert [t.thread_id for t in client.threads.search()] == [thread.thread_id]

    read_only = server.api_key("--tenant", "client-e2e-keys", "--read-only")
    with Client(server.url, api_key=read_only) as client:
        assert client.threads.get(thread.thread_id).metadata == {"via": "key"}
        with pytest.raises(Forbidden) as info:
            client.threads.create()
        assert info.value.status == 403

    with Client(server.url, api_key="gk_not_a_real_key") as client, pytest.raises(Unauthorized):
        client.threads.search()

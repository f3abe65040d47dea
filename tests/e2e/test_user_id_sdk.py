"""`config.configurable.user_id` as a graph sees it, through the official langgraph_sdk.

Auth off: the client's `user_id` reaches the graph unchanged (or is absent), as on the official
server; the reserved keys carry the anonymous caller. Auth on (JWT or API key): `user_id`, the
reserved `langgraph_auth_*` keys and `runtime.server_info.user` are the authenticated user,
whatever the client sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.e2e.api_server import ROOT, clean_env, free_port
from tests.e2e.runs_server import wait_for_ok

pytestmark = pytest.mark.e2e

IDENTITY_GRAPH = ROOT / "tests" / "integration" / "auth_identity_graph.py"
FORGED = {"user_id": "u-42", "langgraph_auth_user_id": "mallory", "tenant_id": "other"}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("user_id") / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"identity": f"{IDENTITY_GRAPH}:graph"}}))
    return path


def _serve(config: Path, **env_extra: str) -> Iterator[tuple[str, dict[str, str]]]:
    port = free_port()
    database = config.parent / f"{env_extra.get('GRAPHKEEP_AUTH', 'none')}.db"
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{database}",
        GRAPHKEEP_WORKERS="1",
        **env_extra,
    )
    log = config.parent / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "--port",
                str(port),
                "--config",
                str(config),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        yield url, env
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def open_server(config_file: Path) -> Iterator[str]:
    for url, _ in _serve(config_file):
        yield url


@pytest.fixture(scope="module")
def auth_server(config_file: Path) -> Iterator[tuple[str, dict[str, str]]]:
    yield from _serve(
        config_file,
        GRAPHKEEP_AUTH="jwt",
        GRAPHKEEP_JWT_SECRET=HS_SECRET,
        GRAPHKEEP_JWT_ISSUER=ISSUER,
        GRAPHKEEP_JWT_AUDIENCE=AUDIENCE,
    )


async def _seen(client: Any, configurable: dict[str, Any] | None) -> dict[str, Any]:
    config = {"configurable": configurable} if configurable is not None else None
    thread = await client.threads.create()
    values = await client.runs.wait(thread["thread_id"], "identity", input={}, config=config)
    seen: dict[str, Any] = values["seen"]
    return seen


async def test_auth_off_passes_the_clients_user_id_unchanged(open_server: str) -> None:
    client = get_client(url=open_server, api_key=None)
    seen = await _seen(client, dict(FORGED))
    assert seen["plain_user_id"] == "u-42"  # the client's own value, as the official server
    # the reserved keys are the server's, never the client's
    assert seen["user_id"] == "anonymous" and seen["tenant_id"] == "default"
    assert seen["auth_user"]["is_authenticated"] is False
    assert seen["server_info_identity"] == "anonymous"

    seen = await _seen(client, {"other": 1})
    assert seen["plain_user_id"] is None  # not invented when the client sent none


async def test_jwt_user_id_is_the_authenticated_user(
    auth_server: tuple[str, dict[str, str]],
) -> None:
    url, _ = auth_server
    token = hs_token(claims(tenant="t-jwt", sub="alice", ttl=600))
    client = get_client(url=url, api_key=None, headers=bearer(token))
    seen = await _seen(client, dict(FORGED))
    assert seen["plain_user_id"] == "alice"  # the client's "u-42" is replaced
    assert seen["user_id"] == "alice" and seen["tenant_id"] == "t-jwt"
    assert seen["auth_user"]["is_authenticated"] is True
    assert (seen["server_info_identity"], seen["server_info_tenant"]) == ("alice", "t-jwt")
    assert (await _seen(client, None))["plain_user_id"] == "alice"


async def test_api_key_user_id_is_the_keys_user(auth_server: tuple[str, dict[str, str]]) -> None:
    url, env = auth_server
    key = subprocess.run(
        [sys.executable, "-m", "app.cli", "apikey", "create", "--tenant", "t-key", "--user", "bot"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    client = get_client(url=url, api_key=key)
    seen = await _seen(client, dict(FORGED))
    assert seen["plain_user_id"] == "bot"
    assert (seen["user_id"], seen["tenant_id"]) == ("bot", "t-key")
    assert seen["server_info_identity"] == "bot"

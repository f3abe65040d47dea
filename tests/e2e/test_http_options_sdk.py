"""langgraph.json `http` options on a live `graphkeep serve` (subprocess, JWT mode, SQLite
file) through the official langgraph_sdk: a custom app from a file path, public by default
and behind auth with `enable_custom_route_auth`; configurable headers reaching a graph; a
disabled route group; logged headers in the access log; and start-up errors naming the key."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, NotFoundError

from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.e2e.api_server import ROOT, clean_env, free_port, graphkeep
from tests.e2e.runs_server import wait_for_ok

pytestmark = pytest.mark.e2e

HTTP_APP = ROOT / "tests" / "integration" / "http_app"


def _token() -> dict[str, str]:
    """Made when used: a token made at import would expire before a long suite gets here."""
    return bearer(hs_token(claims(tenant="acme", sub="alice", ttl=600)))


def _project(tmp: Path, http: dict[str, Any]) -> Path:
    """A project folder as on the official server: langgraph.json next to its files."""
    shutil.copy(HTTP_APP / "custom.py", tmp / "custom.py")
    shutil.copy(HTTP_APP / "headers_graph.py", tmp / "headers_graph.py")
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"headers": "./headers_graph.py:graph"}, "http": http}))
    return config


def _env(tmp: Path, level: str = "INFO") -> dict[str, str]:
    env = clean_env(
        GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{tmp / 'gk.db'}",
        GRAPHKEEP_AUTH="jwt",
        GRAPHKEEP_JWT_SECRET=HS_SECRET,
        GRAPHKEEP_JWT_ISSUER=ISSUER,
        GRAPHKEEP_JWT_AUDIENCE=AUDIENCE,
        GRAPHKEEP_WORKERS="1",
        GRAPHKEEP_LOG_FORMAT="json",
    )
    env["GRAPHKEEP_LOG_LEVEL"] = level  # INFO: the access log
    return env


@contextmanager
def _serve(tmp: Path, http: dict[str, Any]) -> Iterator[tuple[str, Path]]:
    config = _project(tmp, http)
    port = free_port()
    log = tmp / "server.log"
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
            env=_env(tmp),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ok(proc, f"{url}/ok", lambda: log.read_text(errors="replace"))
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            proc.kill()


HTTP = {
    "app": "./custom.py:app",
    "disable_store": True,
    "configurable_headers": {"includes": ["x-team", "x-mode-*"], "excludes": ["x-mode-secret"]},
    "logging_headers": {"includes": ["x-request-source", "authorization"]},
}


async def test_public_custom_routes_headers_and_switches(tmp_path: Path) -> None:
    with _serve(tmp_path, HTTP) as (url, log):
        anonymous = get_client(url=url, api_key=None)
        # a custom route is public by default (the official server's default)
        hello = await anonymous.http.get("/custom/hello")
        assert hello == {"hello": "world", "tenant": None}
        assert await anonymous.http.get("/info") == {"custom": True}  # custom routes win
        with pytest.raises(AuthenticationError):
            await anonymous.threads.search()  # built-ins keep graphkeep's auth

        token = _token()
        client = get_client(
            url=url,
            api_key=None,
            headers={
                **token,
                "x-team": "blue",
                "x-mode-fast": "1",
                "x-mode-secret": "no",
                "x-other": "no",
                "x-request-source": "sdk-test",
            },
        )
        result = await client.runs.wait(None, "headers", input={})
        assert isinstance(result, dict)
        seen = result["seen"]
        assert seen["x-team"] == "blue" and seen["x-mode-fast"] == "1"
        assert "x-mode-secret" not in seen and "x-other" not in seen
        assert "authorization" not in seen
        with pytest.raises(NotFoundError):  # disable_store: the group is gone
            await client.store.search_items(("ns",))
        spec = httpx.get(f"{url}/openapi.json").json()
        assert not any(p.startswith("/store") for p in spec["paths"])

    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    access = [x for x in lines if x.get("logger") == "graphkeep.access" and x.get("headers")]
    assert {"x-request-source": "sdk-test"} in [x["headers"] for x in access], access[:3]
    assert token["Authorization"].split()[1] not in log.read_text()


async def test_custom_route_auth(tmp_path: Path) -> None:
    with _serve(tmp_path, {"app": "./custom.py:app", "enable_custom_route_auth": True}) as (url, _):
        with pytest.raises(AuthenticationError):
            await get_client(url=url, api_key=None).http.get("/custom/hello")
        signed = await get_client(url=url, api_key=None, headers=_token()).http.get("/custom/hello")
        assert signed == {"hello": "world", "tenant": "acme"}


@pytest.mark.parametrize(
    ("http", "named"),
    [
        ({"app": "./missing.py:app"}, "missing.py"),
        ({"app": "./custom.py:nope"}, "no attribute 'nope'"),
        ({"disable_treads": True}, "http.disable_treads"),
    ],
)
def test_start_up_error_names_the_key(tmp_path: Path, http: dict[str, Any], named: str) -> None:
    config = _project(tmp_path, http)
    done = graphkeep(
        "serve", "--port", "0", "--config", str(config), env=_env(tmp_path, "WARNING"), timeout=60
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0], done.stderr

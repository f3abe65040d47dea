"""Refused hostile input keeps the client's keep-alive connection (issue 14 item 11), live."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.api_server import serve

pytestmark = pytest.mark.e2e

REQUESTS: list[tuple[str, str, bytes | None]] = [
    ("POST", "/threads", json.dumps({"metadata": {"k": "\ud800"}}).encode()),
    ("POST", "/threads", b'{"metadata": {"k": "\xed\xa0\x80"}}'),
    ("POST", "/threads/search", json.dumps({"offset": 2**63}).encode()),
    ("GET", "/threads/00000000-0000-0000-0000-000000000000/state/a%00b", None),
    ("PATCH", "/threads/count", b"{}"),
    ("OPTIONS", "/threads/search", None),
    ("POST", "/threads", b"{not json"),
    ("POST", "/store/items/search", json.dumps({"filter": {"n": 10**30}}).encode()),
    ("GET", "/threads/00000000-0000-0000-0000-000000000000/runs?offset=99999999999999999999", None),
]


def test_refusals_keep_the_connection_alive(tmp_path: Path) -> None:
    with serve(
        f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}",
        tmp_path / "serve.log",
        workers=0,
    ) as url:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        conn.request("GET", "/ok")
        conn.getresponse().read()
        sock = conn.sock
        statuses = []
        for method, path, body in REQUESTS:
            headers = {"content-type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            statuses.append(response.status)
            assert 400 <= response.status < 500, (method, path, response.status, payload[:200])
            assert isinstance(json.loads(payload)["detail"], str)
            assert response.getheader("connection", "").lower() != "close", (method, path)
            assert conn.sock is sock, f"{method} {path}: the server closed the connection"
        conn.request("GET", "/ok")
        assert conn.getresponse().status == 200 and conn.sock is sock
        conn.close()
    assert {400, 405, 422} <= set(statuses)

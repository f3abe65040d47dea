"""A backup of an encrypted graphkeep reveals no state outside the documented plaintext.

A live `graphkeep serve` with GRAPHKEEP_ENCRYPTION_KEY gets unique markers in a run's input
(and so the node output, streamed values and updates, the thread's cached values), an
`update_state` value, a Store value and thread metadata; then the raw database bytes are
searched: every SQLite file (`.db`, `-wal`, `-shm`, the server killed so the WAL is not
checkpointed) or `pg_dump --data-only`. Only the metadata marker may appear (README:
metadata is plaintext for filtering). Then: a server with the wrong key or none refuses to
start with one line, and a running server whose key does not open a row answers a typed 500.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.db.sealed import key_id
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import serve

KEY = base64.b64encode(b"k" * 32).decode()
OTHER = base64.b64encode(b"o" * 32).decode()

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]


def _raw_bytes(db_url: str) -> bytes:
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        return b"".join(
            p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
        )
    out = subprocess.run(
        ["pg_dump", "--data-only", "-h", url.host or "127.0.0.1", "-p", str(url.port or 5432),
         "-U", url.username or "postgres", str(url.database)],
        capture_output=True, check=True, env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
    ).stdout  # fmt: skip
    return out


def _found(raw: bytes, marker: str) -> bool:
    needle = marker.encode()
    # bytea columns dump as hex; msgpack'd plaintext would show up as the marker's hex
    return needle in raw or needle.hex().encode() in raw


async def _fill(url: str, markers: dict[str, str]) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        thread = (
            await http.post("/threads", json={"metadata": {"label": markers["metadata"]}})
        ).json()
        tid = thread["thread_id"]
        body = {
            "assistant_id": "chat",
            "input": {"messages": [{"role": "user", "content": markers["input"]}]},
            "stream_mode": ["values", "updates"],
        }
        async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as s:
            text = "".join([chunk async for chunk in s.aiter_text()])
        assert markers["input"] in text  # the stream itself is plaintext (it leaves)
        r = await http.post(
            f"/threads/{tid}/state",
            json={"values": {"messages": [{"role": "user", "content": markers["update"]}]}},
        )
        assert r.status_code == 200, r.text
        r = await http.put(
            "/store/items",
            json={"namespace": ["notes"], "key": "k1", "value": {"text": markers["store"]}},
        )
        assert r.status_code == 204, r.text
        r = await http.post("/threads/" + tid + "/runs/wait", json={**body, "input": None})
        # reads through every sealed copy
        state = (await http.get(f"/threads/{tid}/state")).json()
        assert markers["update"] in str(state["values"])
        assert markers["update"] in str((await http.get(f"/threads/{tid}")).json()["values"])
        item = (await http.get("/store/items", params={"namespace": "notes", "key": "k1"})).json()
        assert item["value"] == {"text": markers["store"]}
        found = await http.post(
            "/store/items/search",
            json={"namespace_prefix": ["notes"], "filter": {"text": markers["store"]}},
        )
        assert found.status_code == 200, found.text
        assert [i["key"] for i in found.json()["items"]] == ["k1"]  # filter ran on opened values
        return str(tid)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = fresh_database(str(request.param), tmp_path)
    yield url
    if request.param == "postgres":
        drop_pg_database(url)


def test_backup_reveals_only_documented_plaintext(database: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:10]
    markers = {k: f"MARK{k.upper()}{tag}" for k in ("input", "update", "store", "metadata")}
    env = {"GRAPHKEEP_ENCRYPTION_KEY": KEY}
    with serve(database, tmp_path, workers=1, env=env) as proc:
        assert proc.url is not None
        tid = asyncio.run(_fill(proc.url, markers))
        proc.kill()  # SQLite: no WAL checkpoint on the way out, the -wal file is searched too
    raw = _raw_bytes(database)
    assert _found(raw, markers["metadata"])  # documented plaintext: thread metadata
    leaked = [name for name in ("input", "update", "store") if _found(raw, markers[name])]
    assert leaked == []
    assert key_id(base64.b64decode(KEY)).encode() in raw  # encryption_keys records it

    # a wrong key, or none, is refused at start-up with one line naming the key id
    for bad in ({"GRAPHKEEP_ENCRYPTION_KEY": OTHER}, {}):
        result = subprocess.run(
            [os.sys.executable, "-m", "app.cli", "serve", "--port", "0"],
            env={**{k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")},
                 "GRAPHKEEP_DATABASE_URL": database, **bad},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("graphkeep: ") and key_id(base64.b64decode(KEY)) in line

    # the old key kept readable beside a new current one: the server starts and reads
    rotated = {"GRAPHKEEP_ENCRYPTION_KEY": OTHER, "GRAPHKEEP_ENCRYPTION_OLD_KEYS": KEY}
    with serve(database, tmp_path, workers=0, env=rotated, name="rotated") as proc:
        r = httpx.get(f"{proc.url}/threads/{tid}/state", timeout=30)
        assert r.status_code == 200 and markers["update"] in r.text


def test_running_server_without_the_key_answers_a_typed_500(database: str, tmp_path: Path) -> None:
    """A rolling key change: replica B (new key, old one kept) writes state that replica A
    (old key only) cannot open. A answers 500 `encryption_key_error` naming the key, for the
    thread too (never its cached values in clear), and keeps serving what it can read."""
    old_only = {"GRAPHKEEP_ENCRYPTION_KEY": KEY}
    both = {"GRAPHKEEP_ENCRYPTION_KEY": OTHER, "GRAPHKEEP_ENCRYPTION_OLD_KEYS": KEY}
    with (
        serve(database, tmp_path, workers=1, env=old_only, name="a") as a,
        serve(database, tmp_path, workers=0, env=both, name="b") as b,
    ):
        readable = httpx.post(f"{a.url}/threads", json={}, timeout=30).json()["thread_id"]
        made = httpx.post(f"{b.url}/threads", json={"metadata": {"graph_id": "echo"}}, timeout=30)
        tid = made.json()["thread_id"]
        r = httpx.post(
            f"{b.url}/threads/{tid}/state", json={"values": {"text": "secret"}}, timeout=30
        )
        assert r.status_code == 200, r.text
        for path in (f"/threads/{tid}", f"/threads/{tid}/state", f"/threads/{tid}/history"):
            method = "POST" if path.endswith("history") else "GET"
            r = httpx.request(method, f"{a.url}{path}", json={} if method == "POST" else None)
            assert r.status_code == 500, (path, r.text)
            body = r.json()
            assert body["code"] == "encryption_key_error"
            assert key_id(base64.b64decode(OTHER)) in body["detail"]
            assert "secret" not in r.text
        assert httpx.get(f"{a.url}/threads/{readable}", timeout=30).status_code == 200
        assert httpx.get(f"{b.url}/threads/{tid}/state", timeout=30).json()["values"] == {
            "text": "secret"
        }
        # a run B queued, claimed by A's worker: A cannot read its kwargs, says so once and
        # the queue does not stall behind it (the lease recovery bounds that run)
        r = httpx.post(f"{b.url}/threads/{tid}/runs", json={"assistant_id": "echo"}, timeout=30)
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 20
        while "cannot be read with the configured encryption keys" not in a.output():
            assert time.monotonic() < deadline, a.output()
            time.sleep(0.1)
        r = httpx.post(
            f"{a.url}/runs/wait", json={"assistant_id": "echo", "input": {"text": "ok"}}, timeout=30
        )
        assert r.status_code == 200 and r.json() == {"text": "ok"}

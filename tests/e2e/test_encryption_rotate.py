"""`graphkeep encryption rotate` while runs write, from plaintext through two keys.

Phase 0 writes plaintext (no key), phase 1 writes with key A. Then a server configured with
B (current) and A (old) keeps running threads while `rotate` re-seals in small batches. After
it, `status` counts every row under B (no plaintext, nothing under A), A is retired, and a
server configured with B alone starts and reads every thread.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from app.db.sealed import key_id
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import ROOT, serve

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_B = base64.b64encode(b"b" * 32).decode()
ID_A = key_id(b"a" * 32)
ID_B = key_id(b"b" * 32)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]


def _cli(db_url: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "encryption", *args],
        cwd=ROOT, env={**clean, "GRAPHKEEP_DATABASE_URL": db_url, **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _runs(url: str, n: int, tag: str) -> list[str]:
    tids = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for i in range(n):
            tid = http.post("/threads", json={}).json()["thread_id"]
            body = {"assistant_id": "echo", "input": {"text": f"{tag}-{i}"}}
            r = http.post(f"/threads/{tid}/runs/wait", json=body)
            assert r.status_code == 200, r.text
            r = http.put(
                "/store/items",
                json={"namespace": ["rot", tag], "key": str(i), "value": {"v": f"{tag}-{i}"}},
            )
            assert r.status_code == 204, r.text
            tids.append(tid)
    return tids


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = fresh_database(str(request.param), tmp_path)
    yield url
    if request.param == "postgres":
        drop_pg_database(url)


def test_rotate_online_from_plaintext_and_old_key(database: str, tmp_path: Path) -> None:
    with serve(database, tmp_path, workers=1, name="plain") as proc:
        assert proc.url is not None
        tids = _runs(proc.url, 4, "plain")
    with serve(database, tmp_path, workers=1, env={"GRAPHKEEP_ENCRYPTION_KEY": KEY_A}) as p:
        assert p.url is not None
        tids += _runs(p.url, 4, "a")
    both = {"GRAPHKEEP_ENCRYPTION_KEY": KEY_B, "GRAPHKEEP_ENCRYPTION_OLD_KEYS": KEY_A}
    before = json.loads(_cli(database, both, "status").stdout)
    assert before["totals"]["plaintext"] > 0 and before["totals"][ID_A] > 0

    with serve(database, tmp_path, workers=2, env=both, name="both") as proc:
        assert proc.url is not None
        url = proc.url
        written: list[str] = []
        writer = threading.Thread(target=lambda: written.extend(_runs(url, 6, "b")))
        writer.start()
        rotated = _cli(database, both, "rotate", "--batch-size", "7")
        writer.join(120)
        assert rotated.returncode == 0, rotated.stderr
        report = json.loads(rotated.stdout)
        assert report["resealed"] > 0 and report["retired_keys"] == [ID_A]
        tids += written

    after = json.loads(_cli(database, {"GRAPHKEEP_ENCRYPTION_KEY": KEY_B}, "status").stdout)
    assert set(after["totals"]) == {ID_B}, after
    with serve(database, tmp_path, workers=0, env={"GRAPHKEEP_ENCRYPTION_KEY": KEY_B}) as p:
        with httpx.Client(base_url=str(p.url), timeout=30) as http:
            for tid in tids:
                r = http.get(f"/threads/{tid}/state")
                assert r.status_code == 200, r.text
                assert r.json()["values"]["text"]
            found = http.post("/store/items/search", json={"namespace_prefix": ["rot"]})
            assert len(found.json()["items"]) == 10  # default limit

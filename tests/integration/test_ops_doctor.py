"""`graphkeep doctor` finds and repairs rows earlier versions stored unreadable (issue 14).

The seed writes what graphkeep before the boundary check let through on SQLite: lone
surrogates in JSON (metadata, run kwargs, a Store value), raw CESU-8 bytes in a text column.
Before the repair those threads fail to read; after it they read back, with U+FFFD in place
of the bad characters, and a second scan is clean. PostgreSQL never held such rows: the scan
there finds nothing in a seeded database.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import LargeBinary, type_coerce, update

from app.db.tables import assistants, runs, store_items, threads
from app.ops.doctor import run_doctor
from tests.e2e.api_server import clean_env, graphkeep
from tests.integration.apiclient import api_client
from tests.integration.test_api_threads import app_state, insert_run

LONE = "\ud800"


async def test_doctor_reports_then_fixes_what_sqlite_kept(sqlite_url: str) -> None:
    async with api_client(sqlite_url) as c:
        engine = app_state(c).engine
        good = (await c.post("/threads", json={"metadata": {"ok": "yes"}})).json()["thread_id"]
        bad = (await c.post("/threads", json={"metadata": {"ok": "no"}})).json()["thread_id"]
        a = (await c.post("/assistants", json={"graph_id": "approval", "name": "x"})).json()
        r = await c.put("/store/items", json={"namespace": ["n"], "key": "k", "value": {"v": 1}})
        assert r.status_code == 204
        run_id = await insert_run(c, bad, status="success")
        # what the old versions stored (the engine's JSON encoder writes `\ud800` escapes)
        async with engine.begin() as conn:
            await conn.execute(
                update(threads)
                .where(threads.c.thread_id == bad)
                .values(metadata={"k": f"a{LONE}b", LONE: 1})
            )
            await conn.execute(
                update(assistants)
                .where(assistants.c.assistant_id == a["assistant_id"])
                .values(description=type_coerce(b"raw \xed\xa0\x80 bytes", LargeBinary))
            )
            await conn.execute(update(store_items).values(value={"v": LONE}))
            await conn.execute(
                update(runs).where(runs.c.run_id == run_id).values(metadata={"m": LONE})
            )
        assert (await c.get(f"/threads/{bad}")).status_code == 500  # the poison, as reported

        found = await run_doctor(engine, fix=False)
        where = sorted((f.table, f.column) for f in found)
        assert where == [
            ("assistants", "description"),
            ("runs", "metadata"),
            ("store_items", "value"),
            ("threads", "metadata"),
        ], [f.line() for f in found]
        assert not any(f.fixed for f in found)
        assert all(LONE not in f.line() for f in found)  # the report itself is printable

        fixed = await run_doctor(engine, fix=True)
        assert len(fixed) == 4 and all(f.fixed for f in fixed)
        assert await run_doctor(engine, fix=False) == []

        thread = (await c.get(f"/threads/{bad}")).json()
        assert thread["metadata"] == {"k": "a\ufffdb", "\ufffd": 1}
        assert (await c.get(f"/threads/{bad}/runs")).status_code == 200
        assert (await c.post(f"/threads/{bad}/copy")).status_code == 200
        assert (await c.post("/threads/search", json={})).status_code == 200
        item = (await c.get("/store/items", params={"namespace": "n", "key": "k"})).json()
        assert item["value"] == {"v": "\ufffd"}
        assert (await c.get(f"/assistants/{a['assistant_id']}")).status_code == 200
        assert (await c.get(f"/threads/{good}")).json()["metadata"] == {"ok": "yes"}


@pytest.mark.postgres
async def test_doctor_on_postgres_finds_nothing(pg_url: str) -> None:
    async with api_client(pg_url) as c:
        await c.post("/threads", json={"metadata": {"emoji": "\U0001f600", "é": "x"}})
        await c.put("/store/items", json={"namespace": ["n"], "key": "k", "value": {"v": 1}})
        assert await run_doctor(app_state(c).engine, fix=False) == []


def test_doctor_cli_exit_codes(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}"
    env = clean_env(GRAPHKEEP_DATABASE_URL=db)
    assert graphkeep("migrate", env=env).returncode == 0
    done = graphkeep("doctor", env=env)
    assert done.returncode == 0, done.stderr
    assert "0 unreadable" in done.stderr

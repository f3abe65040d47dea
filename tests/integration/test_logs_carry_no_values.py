"""Logs carry no request data (issue 14 item 10): markers placed in every kind of stored value
never show up in the captured logs, whatever error path the requests take; the engines never
render bound parameters into their errors."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert

from app.config import Settings
from app.db.engine import create_engine
from app.db.tables import threads
from app.db.types import utcnow
from app.logging import configure
from app.main import create_app
from tests.conftest import truncate_all

MARK = "MARKER-7f3a9c"


def mark(kind: str) -> str:
    return f"{MARK}-{kind}"


@pytest.fixture
def captured(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    configure(Settings(log_format="json", log_level="DEBUG"))
    client_log = logging.getLogger("httpx")  # the test's own client logs its URLs
    client_level = client_log.level
    client_log.setLevel(logging.WARNING)
    yield capsys
    client_log.setLevel(client_level)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def client(db_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"poison": "tests.graphs.hostile_graphs:poison"}}))
    app = create_app(Settings(database_url=db_url, config_file=config, workers=1))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gk", timeout=30
            ) as c:
                yield c
        finally:
            await truncate_all(app.state.graphkeep.engine)


async def _send(c: httpx.AsyncClient, method: str, path: str, body: Any = None, **kw: Any) -> int:
    content = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if content is not None else {}
    r = await c.request(method, path, content=content, headers=headers, **kw)
    assert r.status_code < 500, (method, path, r.status_code, r.text[:200])
    return r.status_code


async def test_markers_in_every_stored_value_never_reach_the_logs(
    client: httpx.AsyncClient, captured: pytest.CaptureFixture[str]
) -> None:
    c = client
    thread = (
        await c.post("/threads", json={"metadata": {"m": mark("metadata"), "graph_id": "poison"}})
    ).json()
    t = thread["thread_id"]
    a = (await c.post("/assistants", json={"graph_id": "poison", "name": mark("name")})).json()
    await _send(
        c,
        "PUT",
        "/store/items",
        {"namespace": [mark("ns")], "key": mark("key"), "value": {"v": mark("value")}},
    )
    await _send(
        c, "POST", f"/threads/{t}/state", {"values": {"out": mark("state")}, "as_node": "emit"}
    )
    # runs: success with a marker in input and output, a graph exception carrying a marker,
    # output storage cannot hold (the settle path)
    for kind in (f"echo:{mark('output')}", f"raise:{mark('exception')}", "nul"):
        await _send(
            c,
            "POST",
            f"/threads/{t}/runs/wait",
            {
                "assistant_id": "poison",
                "input": {"kind": kind},
                "metadata": {"r": mark("run-metadata")},
            },
        )
    # every error path reachable from outside, each with a marker in the offending value
    errors: list[tuple[str, str, Any]] = [
        ("POST", "/threads", {"metadata": {"k": mark("nul") + "\x00"}}),
        ("POST", "/threads", {"metadata": {"k": mark("surrogate") + "\ud800"}}),
        ("POST", "/threads", {"thread_id": mark("bad-id")}),
        ("POST", "/threads", {"thread_id": t}),  # 409
        ("POST", "/threads/search", {"offset": 2**63, "metadata": {"x": mark("filter")}}),
        ("POST", "/threads/search", {"sort_by": mark("sort")}),
        ("POST", "/assistants", {"graph_id": mark("graph")}),
        ("PATCH", f"/assistants/{a['assistant_id']}", {"graph_id": mark("graph-patch")}),
        ("GET", f"/assistants/{mark('assistant-id')}", None),
        ("PUT", "/store/items", {"namespace": [mark("dot") + "."], "key": "k", "value": {}}),
        ("POST", "/store/items/search", {"query": mark("query")}),  # no index: 400
        ("POST", f"/threads/{t}/state/checkpoint", {"checkpoint": {"checkpoint_id": mark("cp")}}),
        ("GET", f"/threads/{t}/state/{mark('cp-path')}", None),
        ("POST", f"/threads/{t}/runs", {"assistant_id": mark("assistant")}),
        ("POST", f"/threads/{t}/runs", {"assistant_id": "poison", "webhook": mark("hook")}),
        (
            "POST",
            f"/threads/{t}/history",
            {"before": {"configurable": {"checkpoint_id": mark("before")}}},
        ),
        ("GET", f"/threads/{t}/runs?status={mark('status')}", None),
        (
            "PATCH",
            f"/threads/{t}",
            {"metadata": {"deep": json.loads("[" * 150 + "]" * 150), "k": mark("deep")}},
        ),
    ]
    for method, path, body in errors:
        await _send(c, method, path, body)
    r = await c.get(f"/threads/{t}/stream", headers={"Last-Event-ID": mark("event-id")})
    assert r.status_code == 422
    r = await c.get(
        "/threads/search",
        headers={"x-request-id": "req-1", "authorization": f"Bearer {mark('token')}"},
    )
    assert r.status_code == 405
    out = captured.readouterr()
    logs = out.out + out.err
    assert "run failed" in logs  # the capture really holds the run's logs
    assert MARK not in logs, [line for line in logs.splitlines() if MARK in line][:5]


async def test_engines_never_render_bound_parameters(db_url: str) -> None:
    engine = create_engine(db_url, null_pool=True)
    thread_id = str(uuid.uuid4())
    row = {
        "thread_id": thread_id,
        "tenant_id": "t",
        "metadata": {"m": mark("bound")},
        "created_at": utcnow(),
        "updated_at": utcnow(),
        "state_updated_at": utcnow(),
    }
    try:
        with pytest.raises(Exception) as info:
            async with engine.begin() as conn:  # no status: a NOT NULL violation
                await conn.execute(insert(threads).values(**row))
        assert "hidden" in str(info.value)
        assert MARK not in str(info.value)
    finally:
        await truncate_all(engine)
        await engine.dispose()

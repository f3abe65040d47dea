"""The reads the console added to the domains, on both dialects: the checkpoint tree page
(headers only, paged, subgraph namespaces, writing nodes), the runs overview, the Store's
size, stored run events; and the console switched off."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver, make_serde
from app.checkpoint.tree import tree_page
from app.config import Settings
from app.db.tables import runs
from app.db.types import utcnow
from app.main import create_app
from app.runs.overview import runs_overview
from app.store import SQLStore
from app.store.stats import count_items
from app.threads.schemas import ThreadCreate
from app.threads.service import ThreadService
from tests.graphs.run_graphs import _nested, _steps


async def test_tree_pages_headers_with_writers_and_subgraphs(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine, serde=make_serde(None)).for_tenant("acme")
    steps = _steps.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t-steps"}}
    await steps.ainvoke({"tag": "q"}, config)
    history = [s async for s in steps.aget_state_history(config)]
    at_step_1 = next(s for s in history if s.metadata and s.metadata["step"] == 1)
    forked = await steps.aupdate_state(at_step_1.config, {"trail": ["x"]}, as_node="a")

    whole = await tree_page(engine, tenant_id="acme", thread_id="t-steps", before=None, limit=50)
    assert whole.next_before is None
    assert len(whole.nodes) == len(history) + 1
    by_id = {n.checkpoint_id: n for n in whole.nodes}
    fork = by_id[forked["configurable"]["checkpoint_id"]]
    assert fork.source == "update" and fork.writers == []
    assert fork.parent_id == at_step_1.config["configurable"]["checkpoint_id"]
    assert [by_id[s.config["configurable"]["checkpoint_id"]].writers for s in history[:3]] == [
        ["c"],
        ["b"],
        ["a"],
    ]
    # paging: two pages of 4 cover everything once, newest first
    first = await tree_page(engine, tenant_id="acme", thread_id="t-steps", before=None, limit=4)
    assert first.next_before is not None and len(first.nodes) == 4
    second = await tree_page(
        engine, tenant_id="acme", thread_id="t-steps", before=first.next_before, limit=4
    )
    ids = [n.checkpoint_id for n in first.nodes + second.nodes]
    assert sorted(ids, reverse=True) == ids and set(ids) == set(by_id)
    # another tenant sees nothing of it
    other = await tree_page(engine, tenant_id="other", thread_id="t-steps", before=None, limit=50)
    assert other.nodes == []

    nested = _nested.compile(checkpointer=saver)
    await nested.ainvoke({"items": []}, {"configurable": {"thread_id": "t-nested"}})
    page = await tree_page(engine, tenant_id="acme", thread_id="t-nested", before=None, limit=50)
    namespaces = {n.checkpoint_ns for n in page.nodes}
    assert "" in namespaces and any(ns.startswith("child:") for ns in namespaces)
    child = [n for n in page.nodes if n.checkpoint_ns.startswith("child:")]
    assert any(n.writers == ["child_step"] for n in child)


async def test_runs_overview_and_store_size(engine: AsyncEngine) -> None:
    now = utcnow()
    threads = ThreadService(engine=engine, graphs=None, saver=None)  # rows only
    thread = await threads.create_thread(tenant_id="acme", body=ThreadCreate())
    other = await threads.create_thread(tenant_id="globex", body=ThreadCreate())
    thread_of = {"acme": thread.thread_id, "globex": other.thread_id}

    def run(run_id: str, tenant: str, status: str, **extra: object) -> dict[str, object]:
        return {
            "run_id": run_id,
            "tenant_id": tenant,
            "thread_id": thread_of[tenant],
            "assistant_id": "00000000-0000-0000-0000-000000000002",
            "graph_id": "steps",
            "status": status,
            "metadata": {},
            "kwargs": {},
            "multitask_strategy": "enqueue",
            "created_at": now,
            "updated_at": now,
            "available_at": now,
            "worker_id": None,
            "lease_expires_at": None,
            "error": None,
            **extra,
        }

    lease = now + timedelta(seconds=30)
    rows = [
        run(
            "00000000-0000-0000-0000-0000000000a1",
            "acme",
            "running",
            worker_id="w1",
            lease_expires_at=lease,
        ),
        run("00000000-0000-0000-0000-0000000000a2", "acme", "pending"),
        run("00000000-0000-0000-0000-0000000000a3", "acme", "error", error={"message": "boom"}),
        run(
            "00000000-0000-0000-0000-0000000000b1",
            "globex",
            "running",
            worker_id="w2",
            lease_expires_at=lease,
        ),
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(runs), rows)
    seen = await runs_overview(engine, tenant_id="acme")
    assert seen.counts == {"pending": 1, "running": 1}
    assert [w["worker_id"] for w in seen.workers] == ["w1"]  # not globex's worker
    assert [f["status"] for f in seen.failures] == ["error"]
    assert {r["run_id"][-2:] for r in seen.active} == {"a1", "a2"}

    store = SQLStore(engine)
    await store.for_tenant("acme").aput(("n",), "k1", {"v": 1})
    await store.for_tenant("acme").aput(("n",), "k2", {"v": 2})
    await store.for_tenant("globex").aput(("n",), "k1", {"v": 3})
    assert await count_items(engine, tenant_id="acme") == 2
    assert await count_items(engine, tenant_id="nobody") == 0


async def test_console_off_removes_it(db_url: str) -> None:
    app = create_app(Settings(database_url=db_url, console="off", workers=0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            assert (await client.get("/console")).status_code == 404
            assert (await client.get("/console/static/console.css")).status_code == 404
            root = await client.get("/")  # with the console off, `/` leads to the API docs
            assert root.status_code == 307 and root.headers["location"] == "/docs"
    app = create_app(Settings(database_url=db_url, workers=0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            root = await client.get("/")
            assert root.status_code == 307 and root.headers["location"] == "/console"
            css = await client.get("/console/static/console.css")
            assert css.status_code == 200 and "text/css" in css.headers["content-type"]

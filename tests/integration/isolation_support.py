"""Tenant A's seeded resources and two authenticated clients (for the isolation tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.conftest import truncate_all

MARKER = "isolation-marker-5e1d"
GRAPH_ID = "agent"
SKIP_PATHS = frozenset({"/ok", "/info", "/ready", "/metrics", "/openapi.json", "/docs", "/redoc"})


@dataclass
class Seed:
    """Tenant A's resources (ids) and what the matrix needs to address them."""

    ids: dict[str, str] = field(default_factory=dict)
    namespace: list[str] = field(default_factory=list)
    key: str = "item-1"
    has_item: bool = False

    def all_ids(self) -> set[str]:
        return {v for v in self.ids.values() if v}


# Which seed id fills a path parameter (by name). Unknown names fail the test on purpose.
PATH_PARAM_SOURCES = {
    "assistant_id": "assistant_id",
    "thread_id": "thread_id",
    "run_id": "run_id",
    "checkpoint_id": "checkpoint_id",
    "cron_id": "cron_id",
}
NON_ID_PATH_PARAMS = {"namespace": "a|b"}  # subgraph namespace etc.: not tenant-owned


@dataclass
class Tenants:
    app: FastAPI
    a: httpx.AsyncClient
    b: httpx.AsyncClient
    spec: dict[str, Any]

    def client(self, tenant: str, sub: str, **extra: Any) -> httpx.AsyncClient:
        """Another caller on the same app (close it, or use it as a context manager)."""
        token = hs_token(claims(tenant=tenant, sub=sub, ttl=3600, **extra))
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        return httpx.AsyncClient(transport=transport, base_url="http://t", headers=bearer(token))

    def has(self, method: str, path: str) -> bool:
        return method.lower() in self.spec["paths"].get(path, {})


@asynccontextmanager
async def open_tenants(db_url: str, **overrides: Any) -> AsyncIterator[Tenants]:
    """The app in JWT mode with clients for tenant A (alice) and tenant B (bob)."""
    settings = Settings(
        database_url=db_url,
        auth="jwt",
        jwt_secret=HS_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        workers=1,
        **overrides,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        token_a = hs_token(claims(tenant="tenant-a", sub="alice", ttl=3600))
        token_b = hs_token(claims(tenant="tenant-b", sub="bob", ttl=3600))
        async with (
            httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=bearer(token_a)
            ) as a,
            httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=bearer(token_b)
            ) as b,
        ):
            try:
                yield Tenants(app=app, a=a, b=b, spec=app.openapi())
            finally:
                await truncate_all(app.state.graphkeep.engine)


def _ok(r: httpx.Response) -> Any:
    assert r.status_code < 300, f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}"
    return r.json() if r.content.strip() else None


async def seed_tenant(t: Tenants) -> Seed:
    """Create A's resources through the API routes that exist right now."""
    seed = Seed(namespace=["isolation", MARKER])
    c = t.a
    body: dict[str, Any]
    if t.has("post", "/assistants"):
        body = {"graph_id": GRAPH_ID, "name": MARKER, "metadata": {"marker": MARKER}}
        seed.ids["assistant_id"] = _ok(await c.post("/assistants", json=body))["assistant_id"]
    if t.has("post", "/threads"):
        body = {"metadata": {"marker": MARKER, "graph_id": GRAPH_ID}}
        seed.ids["thread_id"] = _ok(await c.post("/threads", json=body))["thread_id"]
    thread = seed.ids.get("thread_id")
    if thread and t.has("post", "/threads/{thread_id}/runs/wait"):
        run_input = {"messages": [{"role": "human", "content": MARKER}]}
        body = {
            "assistant_id": seed.ids.get("assistant_id", GRAPH_ID),
            "input": run_input,
            "metadata": {"marker": MARKER},
        }
        _ok(await c.post(f"/threads/{thread}/runs/wait", json=body))
        runs = _ok(await c.get(f"/threads/{thread}/runs"))
        seed.ids["run_id"] = runs[0]["run_id"]
    elif thread and t.has("post", "/threads/{thread_id}/state"):
        body = {"values": {"messages": [{"role": "human", "content": MARKER}]}}
        _ok(await c.post(f"/threads/{thread}/state", json=body))
    if thread and t.has("get", "/threads/{thread_id}/state"):
        state = _ok(await c.get(f"/threads/{thread}/state"))
        if state.get("checkpoint"):
            seed.ids["checkpoint_id"] = state["checkpoint"]["checkpoint_id"]
    if t.has("post", "/threads") and t.has("post", "/threads/{thread_id}/runs"):
        # a second thread with a run that stays pending: cancels must not reach it
        pending_thread = _ok(await c.post("/threads", json={"metadata": {"marker": MARKER}}))
        body = {"assistant_id": GRAPH_ID, "input": {"messages": []}, "after_seconds": 3600}
        run = _ok(await c.post(f"/threads/{pending_thread['thread_id']}/runs", json=body))
        seed.ids["pending_thread_id"] = pending_thread["thread_id"]
        seed.ids["pending_run_id"] = run["run_id"]
    if thread and t.has("post", "/threads/{thread_id}/runs/crons"):
        body = {"assistant_id": GRAPH_ID, "schedule": "0 0 1 1 *", "metadata": {"m": MARKER}}
        cron = _ok(await c.post(f"/threads/{thread}/runs/crons", json=body))
        seed.ids["cron_id"] = cron["cron_id"]
    if t.has("put", "/store/items") and t.app.state.graphkeep.store is not None:
        body = {"namespace": seed.namespace, "key": seed.key, "value": {"marker": MARKER}}
        _ok(await c.put("/store/items", json=body))
        seed.has_item = True
    return seed


async def snapshot(t: Tenants, seed: Seed) -> dict[str, Any]:
    """Everything A can read about its own resources (compared before and after B's sweep)."""
    c = t.a
    out: dict[str, Any] = {}
    reads: list[tuple[str, str, str, dict[str, Any] | None]] = []
    if "assistant_id" in seed.ids:
        reads.append(("assistant", "GET", f"/assistants/{seed.ids['assistant_id']}", None))
    for key in ("thread_id", "pending_thread_id"):
        if key in seed.ids:
            tid = seed.ids[key]
            reads.append((key, "GET", f"/threads/{tid}", None))
            reads.append((f"{key}.state", "GET", f"/threads/{tid}/state", None))
            reads.append((f"{key}.history", "POST", f"/threads/{tid}/history", {"limit": 100}))
            reads.append((f"{key}.runs", "GET", f"/threads/{tid}/runs", None))
    if seed.has_item:
        ns = ".".join(seed.namespace)
        reads.append(("item", "GET", f"/store/items?namespace={ns}&key={seed.key}", None))
    for name, method, url, body in reads:
        path = url.split("?")[0]
        template = _template_for(t, method, path)
        if template is None:
            continue
        r = await c.request(method, url, json=body)
        out[name] = (r.status_code, r.json() if r.content.strip() else None)
    return out


def _template_for(t: Tenants, method: str, path: str) -> str | None:
    parts = path.strip("/").split("/")
    for template, ops in t.spec["paths"].items():
        tparts = template.strip("/").split("/")
        if len(tparts) == len(parts) and method.lower() in ops:
            if all(tp == p or tp.startswith("{") for tp, p in zip(tparts, parts, strict=True)):
                return str(template)
    return None

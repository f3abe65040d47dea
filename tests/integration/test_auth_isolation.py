"""Cross-tenant matrix, generated from the app's own OpenAPI spec.

Tenant A gets one of everything (assistant, thread with a finished run and checkpoints, a
pending run, a store item), each carrying MARKER. Then, for EVERY operation in `app.openapi()`:

- with path ids: tenant B calls it with A's ids and with fresh random ids; both answers must be
  the same (status and body, ids masked): "exactly as if it did not exist". A 422 fails the
  test (the handler never ran), so the generated request must be valid.
- without path ids (lists, searches, counts, namespaces, creates that take ids in the body):
  B's answer must not contain A's ids or MARKER; counts must be lower than A's.

Afterwards A's data must be unchanged. New routes are covered automatically; an unknown path
parameter name fails the test until PATH_PARAM_SOURCES says where its value comes from.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.integration.isolation_requests import body_for, query_for

MARKER = "isolation-marker-5e1d"
GRAPH_ID = "agent"
REQUEST_TIMEOUT = 20.0
SKIP_PATHS = frozenset({"/ok", "/info", "/ready", "/metrics", "/openapi.json", "/docs", "/redoc"})


@dataclass
class Seed:
    """Tenant A's resources (ids) and what the matrix needs to address them."""

    ids: dict[str, str] = field(default_factory=dict)
    namespace: list[str] = field(default_factory=list)
    key: str = "item-1"

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

    def has(self, method: str, path: str) -> bool:
        return method.lower() in self.spec["paths"].get(path, {})


@pytest.fixture
async def tenants(db_url: str) -> AsyncIterator[Tenants]:
    settings = Settings(
        database_url=db_url,
        auth="jwt",
        jwt_secret=HS_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        workers=1,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
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
            yield Tenants(app=app, a=a, b=b, spec=app.openapi())


def _ok(r: httpx.Response) -> Any:
    assert r.status_code < 300, f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}"
    return r.json() if r.content.strip() else None


async def seed_tenant(t: Tenants) -> Seed:
    """Create A's resources through the API routes that exist right now."""
    seed = Seed(namespace=["isolation", MARKER])
    c = t.a
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
    if t.has("put", "/store/items"):
        body = {"namespace": seed.namespace, "key": seed.key, "value": {"marker": MARKER}}
        _ok(await c.put("/store/items", json=body))
    return seed


async def snapshot(t: Tenants, seed: Seed) -> dict[str, Any]:
    """Everything A can read about its own resources (compared before and after B's sweep)."""
    c = t.a
    out: dict[str, Any] = {}
    reads = []
    if "assistant_id" in seed.ids:
        reads.append(("assistant", "GET", f"/assistants/{seed.ids['assistant_id']}", None))
    for key in ("thread_id", "pending_thread_id"):
        if key in seed.ids:
            tid = seed.ids[key]
            reads.append((key, "GET", f"/threads/{tid}", None))
            reads.append((f"{key}.state", "GET", f"/threads/{tid}/state", None))
            reads.append((f"{key}.history", "POST", f"/threads/{tid}/history", {"limit": 100}))
            reads.append((f"{key}.runs", "GET", f"/threads/{tid}/runs", None))
    if seed.namespace:
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
                return template
    return None


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    ops = []
    for path, item in sorted(spec["paths"].items()):
        if path in SKIP_PATHS:
            continue
        for method, op in sorted(item.items()):
            if method in {"get", "post", "put", "patch", "delete"}:
                ops.append((method.upper(), path, op))
    return ops


def _path_params(path: str) -> list[str]:
    return [seg[1:-1] for seg in path.split("/") if seg.startswith("{") and seg.endswith("}")]


def _fill(path: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


def _mask(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace(value, f"<{name}>")
    return text


async def _call(
    c: httpx.AsyncClient, method: str, url: str, body: Any, params: dict[str, Any]
) -> httpx.Response:
    kwargs: dict[str, Any] = {"params": params}
    if body is not None:
        kwargs["content"] = json.dumps(body)
        kwargs["headers"] = {"content-type": "application/json"}
    return await asyncio.wait_for(c.request(method, url, **kwargs), REQUEST_TIMEOUT)


def _leaks(r: httpx.Response, seed: Seed) -> list[str]:
    """A's ids or MARKER in a response, except ids B itself sent (echoing them is no leak)."""
    sent = str(r.request.url) + r.request.content.decode()
    return [s for s in [*seed.all_ids(), MARKER] if s in r.text and s not in sent]


async def test_cross_tenant_matrix(tenants: Tenants) -> None:
    t = tenants
    seed = await seed_tenant(t)
    before = await snapshot(t, seed)
    problems: list[str] = []
    covered_with_ids: list[str] = []

    for method, path, op in _operations(t.spec):
        params = _path_params(path)
        unknown = [p for p in params if p not in PATH_PARAM_SOURCES and p not in NON_ID_PATH_PARAMS]
        if unknown:
            problems.append(f"{method} {path}: unknown path params {unknown}")
            continue
        id_params = [p for p in params if p in PATH_PARAM_SOURCES]
        body = body_for(t.spec, op, seed)
        query = query_for(op, seed)
        if id_params:
            sources = [PATH_PARAM_SOURCES[p] for p in id_params]
            if any(s not in seed.ids for s in sources):
                problems.append(f"{method} {path}: no seeded {sources} (seed route missing?)")
                continue
            a_ids = {p: seed.ids[PATH_PARAM_SOURCES[p]] for p in id_params}
            fresh = {p: str(uuid.uuid4()) for p in id_params}
            fixed = dict(NON_ID_PATH_PARAMS)
            a_url = _fill(_fill(path, a_ids), fixed)
            fresh_url = _fill(_fill(path, fresh), fixed)
            r_a = await _call(t.b, method, a_url, body, query)
            r_fresh = await _call(t.b, method, fresh_url, body, query)
            covered_with_ids.append(f"{method} {path}")
            if r_a.status_code == 422 or r_a.status_code >= 500 or r_a.status_code < 400:
                problems.append(f"{method} {path}: B with A's ids got {r_a.status_code} {r_a.text}")
            if r_a.status_code != r_fresh.status_code or _mask(r_a.text, a_ids) != _mask(
                r_fresh.text, fresh
            ):
                problems.append(
                    f"{method} {path}: differs from a missing id: "
                    f"{r_a.status_code} {r_a.text[:200]} vs "
                    f"{r_fresh.status_code} {r_fresh.text[:200]}"
                )
            if _leaks(r_a, seed):
                problems.append(f"{method} {path}: response leaks {_leaks(r_a, seed)}")
        else:
            r_b = await _call(t.b, method, path, body, query)
            if r_b.status_code >= 500:
                problems.append(f"{method} {path}: {r_b.status_code} {r_b.text[:200]}")
            if _leaks(r_b, seed):
                problems.append(f"{method} {path}: B's response leaks {_leaks(r_b, seed)}")
            if path.endswith("/count") and r_b.status_code == 200:
                r_own = await _call(t.a, method, path, body, query)
                if not r_b.json() < r_own.json():
                    problems.append(f"{method} {path}: B counts {r_b.json()}, A {r_own.json()}")

    after = await snapshot(t, seed)
    assert not problems, "\n".join(problems)
    assert after == before, "tenant A's data changed after tenant B's requests"
    if not covered_with_ids:  # TODO(issue 6): becomes a required-route list once they land
        pytest.skip("the API has no endpoint with an id path parameter yet")

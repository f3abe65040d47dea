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
from typing import Any

import httpx
import pytest

from app.api.auth import is_write
from tests.integration.isolation_requests import body_for, query_for
from tests.integration.isolation_support import (
    MARKER,
    NON_ID_PATH_PARAMS,
    PATH_PARAM_SOURCES,
    SKIP_PATHS,
    Seed,
    Tenants,
    open_tenants,
    seed_tenant,
    snapshot,
)

REQUEST_TIMEOUT = 20.0
# Core routes that must exist and be swept (the sweep itself covers every route in the spec).
REQUIRED_COVERAGE = frozenset(
    {
        "GET /assistants/{assistant_id}",
        "PATCH /assistants/{assistant_id}",
        "DELETE /assistants/{assistant_id}",
        "POST /assistants/{assistant_id}/versions",
        "POST /assistants/search",
        "POST /assistants/count",
        "GET /threads/{thread_id}",
        "PATCH /threads/{thread_id}",
        "DELETE /threads/{thread_id}",
        "POST /threads/{thread_id}/copy",
        "GET /threads/{thread_id}/state",
        "POST /threads/{thread_id}/state",
        "POST /threads/{thread_id}/history",
        "POST /threads/search",
        "POST /threads/count",
        "POST /threads/prune",
        "GET /threads/{thread_id}/runs",
        "POST /threads/{thread_id}/runs",
        "POST /threads/{thread_id}/runs/wait",
        "POST /threads/{thread_id}/runs/stream",
        "GET /threads/{thread_id}/runs/{run_id}",
        "DELETE /threads/{thread_id}/runs/{run_id}",
        "GET /threads/{thread_id}/runs/{run_id}/join",
        "GET /threads/{thread_id}/runs/{run_id}/stream",
        "GET /threads/{thread_id}/stream",
        "POST /threads/{thread_id}/runs/{run_id}/cancel",
        "POST /threads/{thread_id}/commands",
        "POST /threads/{thread_id}/stream/events",
        "POST /runs/cancel",
        "PUT /store/items",
        "GET /store/items",
        "DELETE /store/items",
        "POST /store/items/search",
        "POST /store/namespaces",
        "POST /runs/crons",
        "POST /threads/{thread_id}/runs/crons",
        "POST /runs/crons/search",
        "POST /runs/crons/count",
        "GET /runs/crons/{cron_id}",
        "PATCH /runs/crons/{cron_id}",
        "DELETE /runs/crons/{cron_id}",
        "GET /threads/{thread_id}/storage",
    }
)


@pytest.fixture
async def tenants(db_url: str) -> AsyncIterator[Tenants]:
    async with open_tenants(db_url) as t:
        yield t


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


async def _check_id_endpoint(
    t: Tenants,
    method: str,
    path: str,
    ids: dict[str, str],
    fresh: dict[str, str],
    body: Any,
    query: dict[str, Any],
    seed: Seed,
    *,
    require_error: bool = True,
) -> list[str]:
    """B using `ids` (some of them A's) must get exactly what B gets for `fresh` ids."""
    fixed = dict(NON_ID_PATH_PARAMS)
    r_a = await _call(t.b, method, _fill(_fill(path, ids), fixed), body, query)
    r_fresh = await _call(t.b, method, _fill(_fill(path, fresh), fixed), body, query)
    problems = []
    if (
        r_a.status_code == 422
        or r_a.status_code >= 500
        or (require_error and r_a.status_code < 400)
    ):
        problems.append(f"{method} {path}: B with A's ids got {r_a.status_code} {r_a.text}")
    if r_a.status_code != r_fresh.status_code or _mask(r_a.text, ids) != _mask(r_fresh.text, fresh):
        problems.append(
            f"{method} {path}: differs from a missing id: {r_a.status_code} {r_a.text[:200]} "
            f"vs {r_fresh.status_code} {r_fresh.text[:200]}"
        )
    if _leaks(r_a, seed):
        problems.append(f"{method} {path}: response leaks {_leaks(r_a, seed)}")
    return problems


async def sweep(t: Tenants, seed: Seed, own_thread: str) -> tuple[list[str], list[str]]:
    """B's pass over every operation of the spec against A's seeded data (A and B are two
    tenants here, two users of one tenant in test_custom_auth_matrix.py); B owns `own_thread`.
    Returns the problems found and the routes covered."""
    problems: list[str] = []
    covered: list[str] = []
    operations = _operations(t.spec)

    # 1. reads without ids, while B owns (almost) nothing: no trace of A; counts below A's
    for method, path, op in operations:
        if _path_params(path) or is_write(method, path):
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        r_b = await _call(t.b, method, path, body, query)
        covered.append(f"{method} {path}")
        if r_b.status_code >= 500:
            problems.append(f"{method} {path}: {r_b.status_code} {r_b.text[:200]}")
        if _leaks(r_b, seed):
            problems.append(f"{method} {path}: B's response leaks {_leaks(r_b, seed)}")
        if path.endswith("/count"):
            r_a = await _call(t.a, method, path, body, query)
            if not (r_a.status_code == r_b.status_code == 200 and r_b.json() < r_a.json()):
                problems.append(f"{method} {path}: B counts {r_b.text}, A counts {r_a.text}")

    # 2. every operation with an id in its path: A's ids behave exactly like missing ones
    for method, path, op in operations:
        params = _path_params(path)
        unknown = [p for p in params if p not in PATH_PARAM_SOURCES and p not in NON_ID_PATH_PARAMS]
        if unknown:
            problems.append(f"{method} {path}: unknown path params {unknown}")
            continue
        id_params = [p for p in params if p in PATH_PARAM_SOURCES]
        if not id_params:
            continue
        missing = [
            PATH_PARAM_SOURCES[p] for p in id_params if PATH_PARAM_SOURCES[p] not in seed.ids
        ]
        if missing:
            problems.append(f"{method} {path}: nothing seeded for {missing}")
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        a_ids = {p: seed.ids[PATH_PARAM_SOURCES[p]] for p in id_params}
        fresh = {p: str(uuid.uuid4()) for p in id_params}
        problems += await _check_id_endpoint(t, method, path, a_ids, fresh, body, query, seed)
        covered.append(f"{method} {path}")
        if "thread_id" in a_ids and len(a_ids) > 1:
            # B's own thread with A's run / checkpoint: still exactly like a missing one
            mixed = {**a_ids, "thread_id": own_thread}
            fresh_mixed = {**fresh, "thread_id": own_thread}
            problems += await _check_id_endpoint(
                t, method, path, mixed, fresh_mixed, body, query, seed, require_error=False
            )

    # 3. writes without path ids (their bodies point at A's ids and namespace): no leak, no 5xx
    for method, path, op in operations:
        if _path_params(path) or not is_write(method, path):
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        r_b = await _call(t.b, method, path, body, query)
        covered.append(f"{method} {path}")
        if r_b.status_code >= 500:
            problems.append(f"{method} {path}: {r_b.status_code} {r_b.text[:200]}")
        if _leaks(r_b, seed):
            problems.append(f"{method} {path}: B's response leaks {_leaks(r_b, seed)}")

    return problems, covered


async def test_cross_tenant_matrix(tenants: Tenants) -> None:
    t = tenants
    seed = await seed_tenant(t)
    own_thread = (await t.b.post("/threads", json={})).json()["thread_id"]
    before = await snapshot(t, seed)
    problems, covered = await sweep(t, seed, own_thread)

    # 4. thread-stream protocol commands with real envelopes: on A's thread exactly what B
    # gets on a missing one (the SSE stream's held-open case is tests/e2e/test_thread_protocol.py)
    for envelope in (
        {"id": 1, "method": "input.respond", "params": {"interrupt_id": "i", "response": 1}},
        {"id": 2, "method": "agent.getTree", "params": {}},
        {"id": 3, "method": "run.start", "params": {"assistant_id": "no-such-graph"}},
    ):
        problems += await _check_id_endpoint(
            t,
            "POST",
            "/threads/{thread_id}/commands",
            {"thread_id": seed.ids["thread_id"]},
            {"thread_id": str(uuid.uuid4())},
            envelope,
            {},
            seed,
            require_error=False,
        )

    after = await snapshot(t, seed)
    assert not problems, "\n".join(problems)
    assert after == before, "tenant A's data changed after tenant B's requests"
    missing_routes = sorted(REQUIRED_COVERAGE - set(covered))
    assert not missing_routes, f"routes the matrix must cover are missing: {missing_routes}"

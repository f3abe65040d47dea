"""Cross-USER matrix: two users of one tenant behind a `langgraph_sdk.Auth` owner filter.

The cross-tenant matrix (test_auth_isolation.py) run again, generated from the same
openapi.json, with alice as "A" and bob as "B" in one tenant (`acme`, from the user's `org`
field): for every operation with ids, bob on alice's ids gets exactly what a missing id
gets; lists, searches, counts and Store calls show no trace of alice's data; alice's data is
unchanged afterwards. The filters run in SQL (app/api/authz.py); nothing here mocks storage.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from app.api.auth import is_write
from app.config import Settings
from app.main import create_app
from tests.conftest import truncate_all
from tests.integration.isolation_requests import body_for, query_for
from tests.integration.isolation_support import (
    MARKER,
    NON_ID_PATH_PARAMS,
    PATH_PARAM_SOURCES,
    Tenants,
    seed_tenant,
    snapshot,
)
from tests.integration.test_auth_isolation import (
    REQUIRED_COVERAGE,
    _call,
    _check_id_endpoint,
    _leaks,
    _operations,
    _path_params,
)

CONFIG = Path(__file__).parent / "custom_auth" / "langgraph.json"


@asynccontextmanager
async def open_users(db_url: str) -> AsyncIterator[Tenants]:
    """The app with the custom auth handlers; A = alice, B = bob, both of tenant `acme`."""
    settings = Settings(database_url=db_url, config_file=CONFIG, auth_tenant_field="org", workers=1)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)

        def client(user: str) -> httpx.AsyncClient:
            headers = {"authorization": f"Bearer {user}"}
            return httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers)

        async with client("alice") as a, client("bob") as b:
            try:
                yield Tenants(app=app, a=a, b=b, spec=app.openapi())
            finally:
                await truncate_all(app.state.graphkeep.engine)


@pytest.fixture
async def users(db_url: str) -> AsyncIterator[Tenants]:
    async with open_users(db_url) as t:
        yield t


async def test_cross_user_matrix(users: Tenants) -> None:
    t = users
    seed = await seed_tenant(t)
    thread = (await t.a.get(f"/threads/{seed.ids['thread_id']}")).json()
    assert thread["metadata"]["owner"] == "alice"  # the create handler's metadata is stored
    own_thread = (await t.b.post("/threads", json={})).json()["thread_id"]
    before = await snapshot(t, seed)
    problems: list[str] = []
    covered: list[str] = []
    operations = _operations(t.spec)

    for method, path, op in operations:
        if _path_params(path) or is_write(method, path):
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        r_b = await _call(t.b, method, path, body, query)
        covered.append(f"{method} {path}")
        if r_b.status_code >= 500:
            problems.append(f"{method} {path}: {r_b.status_code} {r_b.text[:200]}")
        if _leaks(r_b, seed):
            problems.append(f"{method} {path}: bob's response leaks {_leaks(r_b, seed)}")
        if path.endswith("/count"):
            r_a = await _call(t.a, method, path, body, query)
            if not (r_a.status_code == r_b.status_code == 200 and r_b.json() < r_a.json()):
                problems.append(f"{method} {path}: bob counts {r_b.text}, alice {r_a.text}")

    for method, path, op in operations:
        params = _path_params(path)
        id_params = [p for p in params if p in PATH_PARAM_SOURCES]
        if not id_params or any(
            p not in PATH_PARAM_SOURCES and p not in NON_ID_PATH_PARAMS for p in params
        ):
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        a_ids = {p: seed.ids[PATH_PARAM_SOURCES[p]] for p in id_params}
        fresh = {p: str(uuid.uuid4()) for p in id_params}
        problems += await _check_id_endpoint(t, method, path, a_ids, fresh, body, query, seed)
        covered.append(f"{method} {path}")
        if "thread_id" in a_ids and len(a_ids) > 1:
            mixed = {**a_ids, "thread_id": own_thread}
            fresh_mixed = {**fresh, "thread_id": own_thread}
            problems += await _check_id_endpoint(
                t, method, path, mixed, fresh_mixed, body, query, seed, require_error=False
            )

    for method, path, op in operations:
        if _path_params(path) or not is_write(method, path):
            continue
        body, query = body_for(t.spec, op, seed), query_for(op, seed)
        r_b = await _call(t.b, method, path, body, query)
        covered.append(f"{method} {path}")
        if r_b.status_code >= 500:
            problems.append(f"{method} {path}: {r_b.status_code} {r_b.text[:200]}")
        if _leaks(r_b, seed):
            problems.append(f"{method} {path}: bob's response leaks {_leaks(r_b, seed)}")

    after = await snapshot(t, seed)
    assert not problems, "\n".join(problems)
    assert after == before, "alice's data changed after bob's requests"
    missing_routes = sorted(REQUIRED_COVERAGE - set(covered))
    assert not missing_routes, f"routes the matrix must cover are missing: {missing_routes}"
    # and alice still sees all of it (the filter admits the owner)
    assert MARKER in (await t.a.post("/threads/search", json={})).text

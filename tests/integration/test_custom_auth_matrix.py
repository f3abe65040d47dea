"""Cross-USER matrix: two users of one tenant behind a `langgraph_sdk.Auth` owner filter.

The cross-tenant matrix (test_auth_isolation.py) run again, generated from the same
openapi.json, with alice as "A" and bob as "B" in one tenant (`acme`, from the user's `org`
field): for every operation with ids, bob on alice's ids gets exactly what a missing id
gets; lists, searches, counts and Store calls show no trace of alice's data; alice's data is
unchanged afterwards. The filters run in SQL (app/api/authz.py); nothing here mocks storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.conftest import truncate_all
from tests.integration.isolation_support import (
    MARKER,
    Tenants,
    seed_tenant,
    snapshot,
)
from tests.integration.test_auth_isolation import REQUIRED_COVERAGE, sweep

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
    problems, covered = await sweep(t, seed, own_thread)

    after = await snapshot(t, seed)
    assert not problems, "\n".join(problems)
    assert after == before, "alice's data changed after bob's requests"
    missing_routes = sorted(REQUIRED_COVERAGE - set(covered))
    assert not missing_routes, f"routes the matrix must cover are missing: {missing_routes}"
    # and alice still sees all of it (the filter admits the owner)
    assert MARKER in (await t.a.post("/threads/search", json={})).text

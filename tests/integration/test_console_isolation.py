"""The console under JWT auth, in process on both dialects: tenant isolation (the console's
rows of the cross-tenant matrix), sign-in cookie, CSRF and read-only enforcement.

Console routes are not in the OpenAPI spec (they are HTML), so the matrix in
test_auth_isolation.py cannot see them; this module sweeps every /console route with a path
id the same way: tenant B with A's ids must get exactly what B gets for random ids.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi.routing import APIRoute

from app.auth.console_session import CSRF_COOKIE, SESSION_COOKIE
from tests.authkit import claims, hs_token
from tests.integration.isolation_support import MARKER, Seed, Tenants, open_tenants, seed_tenant

CSRF = "csrf-test-token"
ID_SOURCES = {
    "thread_id": "thread_id",
    "checkpoint_id": "checkpoint_id",
    "run_id": "run_id",
    "assistant_id": "assistant_id",
}


def _console_routes(t: Tenants) -> list[tuple[str, str]]:
    out = []
    for route in t.app.routes:
        if isinstance(route, APIRoute) and route.path.startswith("/console"):
            for method in sorted(route.methods or ()):
                out.append((method, route.path))
    return out


def _fill(path: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", value)
    return path


def _form(seed_ids: dict[str, str]) -> dict[str, str]:
    return {
        "csrf_token": CSRF,
        "checkpoint_id": seed_ids.get("checkpoint_id", "x"),
        "confirm": seed_ids.get("thread_id", "x"),
        "values": "{}",
        "resume": '"yes"',
        "message": "hello",
    }


async def _call(c: httpx.AsyncClient, method: str, url: str, ids: dict[str, str]) -> httpx.Response:
    headers = {"cookie": f"{CSRF_COOKIE}={CSRF}"}
    params = {"a": ids.get("checkpoint_id", "x"), "b": ids.get("checkpoint_id", "y")}
    if method == "POST":
        return await c.post(url, data=_form(ids), headers=headers)
    return await c.get(url, params=params, headers=headers)


def _mask(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace(value, f"<{name}>")
    # the CSRF cookie of a fresh response is random
    return "\n".join(line for line in text.splitlines() if "csrf" not in line.lower())


def _leaks(text: str, seed: Seed, sent: dict[str, str]) -> list[str]:
    return [s for s in [*seed.all_ids(), MARKER] if s in text and s not in sent.values()]


async def test_console_cross_tenant(db_url: str) -> None:
    async with open_tenants(db_url) as t:
        seed = await seed_tenant(t)
        problems: list[str] = []
        swept = 0
        for method, path in _console_routes(t):
            names = [n for n in ID_SOURCES if "{" + n + "}" in path]
            if not names:
                if method == "GET" and "login" not in path and "stream" not in path:
                    r = await _call(t.b, method, path, {})
                    if r.status_code >= 500 or _leaks(r.text, seed, {}):
                        problems.append(f"{method} {path}: {r.status_code} leaks/5xx")
                continue
            if "stream" in path:  # SSE: checked below on its 404
                continue
            a_ids = {n: seed.ids[ID_SOURCES[n]] for n in names}
            fresh = {n: str(uuid.uuid4()) for n in names}
            r_a = await _call(t.b, method, _fill(path, a_ids), a_ids)
            r_fresh = await _call(t.b, method, _fill(path, fresh), fresh)
            swept += 1
            if r_a.status_code < 400 or r_a.status_code >= 500:
                problems.append(f"{method} {path}: B with A's ids got {r_a.status_code}")
            if r_a.status_code != r_fresh.status_code or _mask(r_a.text, a_ids) != _mask(
                r_fresh.text, fresh
            ):
                problems.append(f"{method} {path}: differs from a missing id")
            if _leaks(r_a.text, seed, a_ids):
                problems.append(f"{method} {path}: leaks {_leaks(r_a.text, seed, a_ids)}")
        stream = await t.b.get(f"/console/runs/{seed.ids['run_id']}/stream")
        assert stream.status_code == 404
        assert not problems, "\n".join(problems)
        assert swept >= 8
        # A sees its own thread page
        own = await t.a.get(f"/console/threads/{seed.ids['thread_id']}")
        assert own.status_code == 200 and MARKER in own.text


async def test_console_sign_in_csrf_and_read_only(db_url: str) -> None:
    async with open_tenants(db_url) as t:
        seed = await seed_tenant(t)
        thread = seed.ids["thread_id"]
        transport = httpx.ASGITransport(app=t.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as browser:
            # signed out: every page sends the browser to the sign-in form
            r = await browser.get("/console")
            assert r.status_code == 303 and r.headers["location"] == "/console/login"
            form = await browser.get("/console/login")
            token_csrf = browser.cookies[CSRF_COOKIE]
            assert form.status_code == 200
            bad = await browser.post(
                "/console/login", data={"token": "nope", "csrf_token": token_csrf}
            )
            assert bad.status_code == 401
            token = hs_token(claims(tenant="tenant-a", sub="alice", ttl=3600))
            # without the CSRF token the sign-in is refused
            refused = await browser.post("/console/login", data={"token": token})
            assert refused.status_code == 403
            ok = await browser.post(
                "/console/login", data={"token": token, "csrf_token": token_csrf}
            )
            assert ok.status_code == 303
            cookie = ok.headers["set-cookie"]
            assert f"{SESSION_COOKIE}=" in cookie and "HttpOnly" in cookie
            assert "SameSite=strict" in cookie and "Path=/console" in cookie
            page = await browser.get(f"/console/threads/{thread}")
            assert page.status_code == 200 and 'data-action="fork"' not in page.text
            assert 'data-action="delete"' in page.text
            assert token not in page.text  # the credential never comes back in a page
            # an action without the CSRF token: refused, nothing written
            no_csrf = await browser.post(
                f"/console/threads/{thread}/delete", data={"confirm": thread}
            )
            assert no_csrf.status_code == 403
            assert (await t.a.get(f"/threads/{thread}")).status_code == 200

        read_token = hs_token(claims(tenant="tenant-a", sub="reader", ttl=3600, scope="read"))
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://t",
            cookies={SESSION_COOKIE: read_token, CSRF_COOKIE: CSRF},
        ) as reader:
            page = await reader.get(f"/console/threads/{thread}")
            assert page.status_code == 200
            assert "data-action=" not in page.text  # no action is offered
            detail = await reader.get(
                f"/console/threads/{thread}/checkpoints/{seed.ids['checkpoint_id']}"
            )
            assert detail.status_code == 200 and "data-action=" not in detail.text
            forced = await reader.post(
                f"/console/threads/{thread}/delete",
                data={"confirm": thread, "csrf_token": CSRF},
            )
            assert forced.status_code == 403
            out = await reader.post("/console/logout", data={"csrf_token": CSRF})
            assert out.status_code == 303  # a read-only session may still sign out
        assert (await t.a.get(f"/threads/{thread}")).status_code == 200


async def test_console_bad_input_is_a_4xx_page(db_url: str) -> None:
    async with open_tenants(db_url) as t:
        seed = await seed_tenant(t)
        thread = seed.ids["thread_id"]
        headers: dict[str, Any] = {"cookie": f"{CSRF_COOKIE}={CSRF}"}
        cases = [
            ("GET", "/console/partials/threads?metadata={not json", None),
            ("GET", "/console/partials/threads?sort=nope", None),
            ("GET", "/console/partials/threads?status=weird", None),
            ("GET", "/console/store?filter=[1]", None),
            ("GET", f"/console/threads/{thread}/diff?a=x&b=y", None),
            ("GET", "/console/threads/not-a-uuid", None),
            ("POST", f"/console/threads/{thread}/fork", {"checkpoint_id": "", "values": "{"}),
            ("POST", f"/console/threads/{thread}/resume", {"resume": "{oops"}),
            ("POST", f"/console/threads/{thread}/delete", {"confirm": "wrong"}),
        ]
        for method, url, data in cases:
            body = {**(data or {}), "csrf_token": CSRF}
            r = await t.a.request(
                method, url, data=body if method == "POST" else None, headers=headers
            )
            assert 400 <= r.status_code < 500, (url, r.status_code, r.text[:300])
            assert "text/html" in r.headers["content-type"]
        assert (await t.a.get(f"/threads/{thread}")).status_code == 200


async def test_console_refuses_unstorable_form_input_and_writes_nothing(db_url: str) -> None:
    """A form is not JSON, so HTTP's boundary check does not read it: the console applies
    the same rule (app/db/storable.py) before anything is written. Before, a fork whose
    values held a NUL wrote its checkpoint and then failed (a 400 with the state changed), an
    integer beyond 64 bits was stored as a float (orjson), and a chat message with a NUL
    left a new empty thread behind."""
    async with open_tenants(db_url) as t:
        seed = await seed_tenant(t)
        thread, checkpoint = seed.ids["thread_id"], seed.ids["checkpoint_id"]
        headers: dict[str, Any] = {"cookie": f"{CSRF_COOKIE}={CSRF}"}

        async def snapshot() -> tuple[Any, ...]:
            state = (await t.a.get(f"/threads/{thread}/state")).json()
            history = (await t.a.post(f"/threads/{thread}/history", json={"limit": 100})).json()
            count = (await t.a.post("/threads/count", json={})).json()
            return state, len(history), count

        before = await snapshot()
        fork = f"/console/threads/{thread}/fork"
        message = '{"messages": [{"role": "human", "content": "CONTENT"}]}'
        cases = [
            (fork, {"values": message.replace("CONTENT", "a\\u0000b")}, "text contains a NUL"),
            (fork, {"values": message.replace('"CONTENT"', str(2**70))}, "outside the 64-bit"),
            (fork, {"values": message.replace('"CONTENT"', "NaN")}, "not finite"),
            (fork, {"values": "[" * 300 + "]" * 300}, "nested deeper than 100"),
            (fork, {"values": "null", "as_node": "a\x00b"}, "form.as_node: text contains"),
            (f"/console/threads/{thread}/resume", {"resume": '"\\u0000"'}, "text contains"),
            ("/console/assistants/agent/chat", {"message": "hi\x00"}, "form.message: text"),
        ]
        for url, data, problem in cases:
            body = {"checkpoint_id": checkpoint, **data, "csrf_token": CSRF}
            r = await t.a.post(url, data=body, headers=headers)
            assert 400 <= r.status_code < 500, (url, data, r.status_code, r.text[:300])
            assert "text/html" in r.headers["content-type"] and problem in r.text, r.text[:500]
        r = await t.a.get(
            "/console/partials/threads", params={"metadata": '{"n": ' + str(2**70) + "}"}
        )
        assert 400 <= r.status_code < 500 and "outside the 64-bit range" in r.text
        assert await snapshot() == before

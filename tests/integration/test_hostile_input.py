"""Hostile input stops at the boundary (issue 14), on both dialects.

Every case is one request a client with a valid credential can send. Each must answer below
500 with a JSON body, leave the server answering `/ok`, and leave the data seeded before it
(a thread with a checkpoint and a run, an assistant, a Store item) reading back unchanged
through get, search, copy, history, runs and Store reads.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.auth.principal import DEFAULT_TENANT
from app.config import Settings
from app.main import create_app
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, claims, hs_token
from tests.conftest import truncate_all
from tests.integration.apiclient import api_client
from tests.integration.test_api_threads import app_state, insert_run

SURROGATE = "\ud800"
NUL = "\x00"
BIG = 2**63
HUGE_DIGITS = "99999999999999999999"


@dataclass
class Case:
    name: str
    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    params: dict[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    expect: tuple[int, ...] = (400, 404, 413, 422)


def _raw(
    name: str, method: str, path: str, body: str | bytes, expect: tuple[int, ...] | None = None
) -> Case:
    content = body.encode() if isinstance(body, str) else body
    headers = {"content-type": "application/json"}
    if expect is None:
        return Case(name, method, path, content=content, headers=headers)
    return Case(name, method, path, content=content, headers=headers, expect=expect)


DEEP = '{"a": ' * 5000 + "1" + "}" * 5000
_COMMAND = '{"id": 1, "method": "run.start", "params": {"assistant_id": "approval", "input": DEEP}}'
_DEEP_ITEM = '{"namespace": ["n"], "key": "k", "value": DEEP}'.replace("DEEP", DEEP)
_DEEP_MODES = {"stream_mode": "[" * 3000 + "]" * 3000}

CASES: list[Case] = [
    # 1. lone surrogates, in every kind of string position
    Case("thread metadata value", "POST", "/threads", {"metadata": {"k": SURROGATE}}),
    Case("thread metadata key", "POST", "/threads", {"metadata": {SURROGATE: 1}}),
    Case("thread id", "POST", "/threads", {"thread_id": SURROGATE}),
    Case(
        "patch metadata (SQLite kept it)", "PATCH", "/threads/{t}", {"metadata": {"k": SURROGATE}}
    ),
    Case("thread search filter", "POST", "/threads/search", {"metadata": {"k": SURROGATE}}),
    Case("thread search values", "POST", "/threads/search", {"values": {SURROGATE: "x"}}),
    Case("thread count filter", "POST", "/threads/count", {"metadata": {"k": SURROGATE}}),
    Case("assistant name", "POST", "/assistants", {"graph_id": "approval", "name": SURROGATE}),
    Case(
        "assistant metadata",
        "POST",
        "/assistants",
        {"graph_id": "approval", "metadata": {"m": SURROGATE}},
    ),
    Case(
        "assistant config",
        "POST",
        "/assistants",
        {"graph_id": "approval", "config": {"c": SURROGATE}},
    ),
    Case("assistant patch name", "PATCH", "/assistants/{a}", {"name": SURROGATE}),
    Case("assistant search name", "POST", "/assistants/search", {"name": SURROGATE}),
    Case("assistant search graph", "POST", "/assistants/search", {"graph_id": SURROGATE}),
    Case("store label", "PUT", "/store/items", {"namespace": [SURROGATE], "key": "k", "value": {}}),
    Case("store key", "PUT", "/store/items", {"namespace": ["n"], "key": SURROGATE, "value": {}}),
    Case(
        "store value",
        "PUT",
        "/store/items",
        {"namespace": ["n"], "key": "k", "value": {"v": SURROGATE}},
    ),
    Case(
        "store value key",
        "PUT",
        "/store/items",
        {"namespace": ["n"], "key": "k", "value": {SURROGATE: 1}},
    ),
    Case("store search filter", "POST", "/store/items/search", {"filter": {"v": SURROGATE}}),
    Case("store search query", "POST", "/store/items/search", {"query": SURROGATE}),
    Case("store search prefix", "POST", "/store/items/search", {"namespace_prefix": [SURROGATE]}),
    Case("store namespaces prefix", "POST", "/store/namespaces", {"prefix": [SURROGATE]}),
    Case("store delete key", "DELETE", "/store/items", {"namespace": ["n"], "key": SURROGATE}),
    Case(
        "update state as_node", "POST", "/threads/{t}/state", {"values": {}, "as_node": SURROGATE}
    ),
    Case("update state values", "POST", "/threads/{t}/state", {"values": {"request": SURROGATE}}),
    Case(
        "update state checkpoint_id",
        "POST",
        "/threads/{t}/state",
        {"values": {}, "checkpoint_id": SURROGATE},
    ),
    Case(
        "state checkpoint id",
        "POST",
        "/threads/{t}/state/checkpoint",
        {"checkpoint": {"checkpoint_id": SURROGATE}},
    ),
    Case(
        "state checkpoint ns",
        "POST",
        "/threads/{t}/state/checkpoint",
        {"checkpoint": {"checkpoint_ns": SURROGATE}},
    ),
    Case(
        "history before",
        "POST",
        "/threads/{t}/history",
        {"before": {"configurable": {"checkpoint_id": SURROGATE}}},
    ),
    Case("history metadata", "POST", "/threads/{t}/history", {"metadata": {"k": SURROGATE}}),
    Case(
        "run input",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "input": {"request": SURROGATE}},
    ),
    Case(
        "run metadata",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "metadata": {"m": SURROGATE}},
    ),
    Case("run assistant id", "POST", "/threads/{t}/runs", {"assistant_id": SURROGATE}),
    Case(
        "run config",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "config": {"configurable": {"x": SURROGATE}}},
    ),
    Case(
        "stateless wait input",
        "POST",
        "/runs/wait",
        {"assistant_id": "approval", "input": {"request": SURROGATE}},
    ),
    Case("cancel run ids", "POST", "/runs/cancel", {"run_ids": [SURROGATE]}),
    Case("copy body", "POST", "/threads/{t}/copy", {"metadata": {"k": SURROGATE}}),
    # raw CESU-8 surrogate bytes (not UTF-8) and other undecodable bodies
    _raw("raw CESU-8 metadata", "POST", "/threads", b'{"metadata": {"k": "\xed\xa0\x80"}}'),
    _raw(
        "raw CESU-8 store",
        "PUT",
        "/store/items",
        b'{"namespace": ["n"], "key": "\xed\xa0\x80", "value": {}}',
    ),
    _raw("latin-1 body", "POST", "/assistants/search", b'{"name": "\xe9"}'),
    # 3. NUL, in bodies, paths and queries
    Case("assistant name NUL", "POST", "/assistants", {"graph_id": "approval", "name": "a" + NUL}),
    Case("assistant search NUL", "POST", "/assistants/search", {"name": NUL}),
    Case(
        "update state checkpoint_id NUL",
        "POST",
        "/threads/{t}/state",
        {"values": {}, "checkpoint_id": "a" + NUL},
    ),
    Case(
        "state checkpoint ns NUL",
        "POST",
        "/threads/{t}/state/checkpoint",
        {"checkpoint": {"checkpoint_ns": NUL}},
    ),
    Case(
        "history before NUL",
        "POST",
        "/threads/{t}/history",
        {"before": {"configurable": {"checkpoint_id": NUL}}},
    ),
    Case("history before query NUL", "GET", "/threads/{t}/history", params={"before": "a\x00b"}),
    Case("state path NUL", "GET", "/threads/{t}/state/a%00b"),
    Case("thread path NUL", "GET", "/threads/a%00b"),
    Case("runs status NUL", "GET", "/threads/{t}/runs", params={"status": NUL}),
    Case("filter key NUL (SQLite 503)", "POST", "/threads/search", {"metadata": {"a" + NUL: 1}}),
    Case("store get NUL", "GET", "/store/items", params={"namespace": "n", "key": "k\x00"}),
    Case("thread metadata NUL", "POST", "/threads", {"metadata": {"k": NUL}}),
    # 4. integers out of range
    Case("threads offset 2^63", "POST", "/threads/search", {"offset": BIG}),
    Case("assistants offset 2^63", "POST", "/assistants/search", {"offset": BIG}),
    Case("versions offset 2^63", "POST", "/assistants/{a}/versions", {"offset": BIG}),
    Case("runs offset 2^63", "GET", "/threads/{t}/runs", params={"offset": str(BIG)}),
    Case("store search offset 2^63", "POST", "/store/items/search", {"offset": BIG}),
    Case("namespaces offset 2^63", "POST", "/store/namespaces", {"offset": BIG}),
    Case("store search offset 1e18", "POST", "/store/items/search", {"offset": 10**18}),
    Case("namespaces offset 1e18", "POST", "/store/namespaces", {"offset": 10**18}),
    Case("namespaces max_depth huge", "POST", "/store/namespaces", {"max_depth": 10**18}),
    Case("threads limit huge", "POST", "/threads/search", {"limit": BIG}),
    Case("filter huge int", "POST", "/threads/search", {"metadata": {"n": 10**30}}),
    Case("metadata huge int", "POST", "/threads", {"metadata": {"n": -(10**30)}}),
    Case("store filter huge int", "POST", "/store/items/search", {"filter": {"n": 10**30}}),
    Case("history limit huge", "GET", "/threads/{t}/history", params={"limit": HUGE_DIGITS}),
    Case("set latest version huge", "POST", "/assistants/{a}/latest", {"version": BIG}),
    # PostgreSQL binds a version as INTEGER: 2^31 was a DataError there (500)
    Case("set latest version 2^31", "POST", "/assistants/{a}/latest", {"version": 2**31}),
    Case("set latest version -2^40", "POST", "/assistants/{a}/latest", {"version": -(2**40)}),
    # 5. after_seconds and other non-finite numbers
    _raw(
        "after_seconds Infinity",
        "POST",
        "/threads/{t}/runs",
        '{"assistant_id": "approval", "after_seconds": Infinity}',
    ),
    _raw(
        "after_seconds 1e999",
        "POST",
        "/threads/{t}/runs",
        '{"assistant_id": "approval", "after_seconds": 1e999}',
    ),
    Case(
        "after_seconds 1e300",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "after_seconds": 1e300},
    ),
    _raw("metadata NaN", "POST", "/threads", '{"metadata": {"x": NaN}}'),
    _raw(
        "ttl -Infinity",
        "PUT",
        "/store/items",
        '{"namespace": ["n"], "key": "k", "value": {}, "ttl": -Infinity}',
    ),
    # 6. Last-Event-ID parsed strictly
    Case(
        "thread stream Last-Event-ID",
        "GET",
        "/threads/{t}/stream",
        headers={"Last-Event-ID": HUGE_DIGITS},
    ),
    Case(
        "thread stream Last-Event-ID seq",
        "GET",
        "/threads/{t}/stream",
        headers={"Last-Event-ID": f"1-{HUGE_DIGITS}"},
    ),
    Case(
        "thread stream Last-Event-ID key 18",
        "GET",
        "/threads/{t}/stream",
        headers={"Last-Event-ID": "9" * 18},
    ),
    Case(
        "run stream Last-Event-ID",
        "GET",
        "/threads/{t}/runs/{r}/stream",
        headers={"Last-Event-ID": HUGE_DIGITS},
    ),
    Case(
        "stateless run stream Last-Event-ID",
        "GET",
        "/runs/{r}/stream",
        headers={"Last-Event-ID": HUGE_DIGITS},
    ),
    # 7. sizes
    Case(
        "100,000 ids",
        "POST",
        "/threads/search",
        {"ids": [str(uuid.UUID(int=i)) for i in range(100_000)]},
    ),
    Case(
        "1,000 namespace labels",
        "PUT",
        "/store/items",
        {"namespace": [f"l{i}" for i in range(1000)], "key": "k", "value": {}},
    ),
    Case("long label", "PUT", "/store/items", {"namespace": ["x" * 5000], "key": "k", "value": {}}),
    Case("long key", "PUT", "/store/items", {"namespace": ["n"], "key": "k" * 5000, "value": {}}),
    Case(
        "deep prefix",
        "POST",
        "/store/items/search",
        {"namespace_prefix": [f"l{i}" for i in range(1000)]},
    ),
    Case("huge filter", "POST", "/threads/search", {"metadata": {f"k{i}": i for i in range(5000)}}),
    Case(
        "huge store filter",
        "POST",
        "/store/items/search",
        {"filter": {f"k{i}": i for i in range(5000)}},
    ),
    Case("huge metadata", "POST", "/threads", {"metadata": {"blob": "x" * 200_000}}),
    Case(
        "cancel 100,000 run ids",
        "POST",
        "/runs/cancel",
        {"run_ids": [str(uuid.UUID(int=i)) for i in range(100_000)]},
    ),
    Case(
        "webhook ::::", "POST", "/threads/{t}/runs", {"assistant_id": "approval", "webhook": "::::"}
    ),
    Case(
        "webhook ftp",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "webhook": "ftp://example.com/x"},
    ),
    Case(
        "webhook no host",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "webhook": "http://"},
    ),
    Case(
        "webhook bad port",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "webhook": "http://h:99999/"},
    ),
    Case(
        "webhook newline",
        "POST",
        "/threads/{t}/runs",
        {"assistant_id": "approval", "webhook": "http://h/\nx"},
    ),
    _raw(
        "nesting 100,000 deep",
        "POST",
        "/threads",
        '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ),
    # too deep for the parser: refused at the boundary on every route, the thread commands
    # (a 500 before), MCP and A2A (an internal JSON-RPC error) included
    *[
        _raw(f"nesting 5,000 deep: {path}", "POST", path, body.replace("DEEP", DEEP), (422,))
        for path, body in [
            ("/threads/{t}/commands", _COMMAND),
            ("/threads/{t}/runs", '{"assistant_id": "approval", "input": DEEP}'),
            ("/threads/{t}/state", '{"values": DEEP}'),
            ("/store/items/search", '{"filter": DEEP}'),
            ("/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": DEEP}'),
            ("/a2a/{a}", '{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": DEEP}'),
        ]
    ],
    _raw("nesting 5,000 deep: store put", "PUT", "/store/items", _DEEP_ITEM, (422,)),
    # a JSON array of stream modes in a query parameter, too deep to parse (a 500 before)
    *[
        Case(
            f"stream_mode nesting 3,000 deep: {path}",
            "GET",
            path,
            params=_DEEP_MODES,
            expect=(422,),
        )
        for path in ("/threads/{t}/runs/{r}/stream", "/threads/{t}/stream")
    ],
    Case(
        "nesting 200 deep",
        "POST",
        "/threads",
        {"metadata": {"x": json.loads("[" * 200 + "]" * 200)}},
    ),
    # 8. a JSON type the field's schema refuses (pydantic's lax mode converted these: false
    # to 0, "10" to 10, 1 to true); each write would change what the snapshot reads back
    *[
        Case(f"{name} {json.dumps(value)}", method, path, {**body, field_: value}, expect=(422,))
        for name, method, path, body, field_, values in [
            ("threads limit", "POST", "/threads/search", {}, "limit", [False, "10", True]),
            ("threads offset", "POST", "/threads/search", {}, "offset", [False, "1"]),
            ("assistants limit", "POST", "/assistants/search", {}, "limit", ["3", True]),
            ("versions offset", "POST", "/assistants/{a}/versions", {}, "offset", [True]),
            ("set latest version", "POST", "/assistants/{a}/latest", {}, "version", ["1"]),
            ("history limit", "POST", "/threads/{t}/history", {}, "limit", ["2", True]),
            ("state subgraphs", "POST", "/threads/{t}/state/checkpoint", {}, "subgraphs", [1]),
            ("store limit", "POST", "/store/items/search", {}, "limit", ["5", False]),
            ("store refresh_ttl", "POST", "/store/items/search", {}, "refresh_ttl", [0, "true"]),
            ("namespaces max_depth", "POST", "/store/namespaces", {}, "max_depth", ["2", True]),
            ("namespaces offset", "POST", "/store/namespaces", {}, "offset", [False]),
            (
                "store put ttl",
                "PUT",
                "/store/items",
                {"namespace": ["seed"], "key": "k", "value": {"v": 2}},
                "ttl",
                ["5", True],
            ),
            (
                "store put index",
                "PUT",
                "/store/items",
                {"namespace": ["seed"], "key": "k", "value": {"v": 2}},
                "index",
                [1],
            ),
            (
                "run stream_subgraphs",
                "POST",
                "/threads/{t}/runs",
                {"assistant_id": "approval"},
                "stream_subgraphs",
                [1, "yes"],
            ),
            (
                "run after_seconds",
                "POST",
                "/threads/{t}/runs",
                {"assistant_id": "approval"},
                "after_seconds",
                ["5", True],
            ),
            (
                "run checkpoint_during",
                "POST",
                "/threads/{t}/runs",
                {"assistant_id": "approval"},
                "checkpoint_during",
                [0],
            ),
            (
                "cron enabled",
                "POST",
                "/threads/{t}/runs/crons",
                {"assistant_id": "approval", "schedule": "0 0 * * *"},
                "enabled",
                [1],
            ),
            ("crons limit", "POST", "/runs/crons/search", {}, "limit", ["2"]),
        ]
        for value in values
    ],
]


async def _snapshot(client: httpx.AsyncClient, seed: dict[str, str]) -> dict[str, Any]:
    """Everything the seeded data reads back as, through every reader the issue broke."""
    t = seed["t"]
    thread = (await client.get(f"/threads/{t}")).json()
    reads = {
        "thread": {k: thread[k] for k in ("thread_id", "metadata", "values", "status")},
        "search": (await client.post("/threads/search", json={"metadata": {"seed": "yes"}})).json(),
        "history": len((await client.get(f"/threads/{t}/history")).json()),
        "runs": [r["run_id"] for r in (await client.get(f"/threads/{t}/runs")).json()],
        "assistant": (await client.get(f"/assistants/{seed['a']}")).json()["name"],
        "item": (await client.get("/store/items", params={"namespace": "seed", "key": "k"})).json()[
            "value"
        ],
        "namespaces": (await client.post("/store/namespaces", json={})).json(),
    }
    copy = await client.post(f"/threads/{t}/copy")
    assert copy.status_code == 200, copy.text
    await client.delete(f"/threads/{copy.json()['thread_id']}")
    for label in ("search", "namespaces"):
        assert isinstance(reads[label], list | dict), reads[label]
    return reads


async def _seed(client: httpx.AsyncClient) -> dict[str, str]:
    r = await client.post("/threads", json={"metadata": {"seed": "yes", "graph_id": "approval"}})
    assert r.status_code == 200, r.text
    t = r.json()["thread_id"]
    r = await client.post(
        f"/threads/{t}/state", json={"values": {"request": "r"}, "as_node": "propose"}
    )
    assert r.status_code == 200, r.text
    r = await client.post("/assistants", json={"graph_id": "approval", "name": "seeded"})
    assert r.status_code == 200, r.text
    a = r.json()["assistant_id"]
    r = await client.put(
        "/store/items", json={"namespace": ["seed"], "key": "k", "value": {"v": 1}}
    )
    assert r.status_code == 204, r.text
    run = await insert_run(client, t, status="success")
    return {"t": t, "a": a, "r": run}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(db_url) as c:
        yield c


def _request(case: Case, seed: dict[str, str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"headers": dict(case.headers)}
    if case.content is not None:
        kwargs["content"] = case.content
    elif case.json is not None:
        # escaped JSON text, as a client sends a lone surrogate (`\ud800`); httpx's own
        # encoder writes UTF-8 and cannot encode one
        kwargs["content"] = json.dumps(case.json).encode()
        kwargs["headers"]["content-type"] = "application/json"
    if case.params is not None:
        kwargs["params"] = case.params
    return kwargs


async def test_every_hostile_case_stops_at_the_boundary(client: httpx.AsyncClient) -> None:
    seed = await _seed(client)
    before = await _snapshot(client, seed)
    count_before = (await client.post("/threads/count", json={})).json()
    failures = []
    for case in CASES:
        path = case.path.format(**seed)
        r = await client.request(case.method, path, **_request(case, seed), timeout=30)
        problem = None
        if r.status_code not in case.expect:
            problem = f"status {r.status_code}"
        elif not r.headers.get("content-type", "").startswith("application/json"):
            problem = f"content-type {r.headers.get('content-type')}"
        elif not isinstance(r.json().get("detail"), str):
            problem = "no string detail"
        if problem:
            failures.append(f"{case.name}: {problem}: {r.text[:200]}")
        assert (await client.get("/ok")).status_code == 200
    assert not failures, "\n".join(failures)
    # nothing was written, and everything seeded reads back unchanged
    assert (await client.post("/threads/count", json={})).json() == count_before
    assert (await _snapshot(client, seed)) == before
    assert len(CASES) >= 90


async def test_sqlite_poison_is_refused_by_the_patch_and_thread_stays_readable(
    client: httpx.AsyncClient,
) -> None:
    # issue 14 item 2: the PATCH answered 500 but committed on SQLite
    seed = await _seed(client)
    r = await client.patch(
        f"/threads/{seed['t']}",
        content=json.dumps({"metadata": {"k": SURROGATE}}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and "surrogate" in r.json()["detail"]
    assert "metadata.k" in r.json()["detail"]  # where, never the value
    assert (await client.get(f"/threads/{seed['t']}")).json()["metadata"]["seed"] == "yes"


async def test_valid_unicode_and_escapes_still_pass(client: httpx.AsyncClient) -> None:
    meta = {"emoji": "\U0001f600", "escaped": "a\\u0000b", "accent": "é", "big": 2**63 - 1}
    r = await client.post("/threads", json={"metadata": meta})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"] == meta
    # an escaped pair in raw JSON text is one valid code point
    raw = b'{"metadata": {"pair": "\\ud83d\\ude00", "e": 1e5}}'
    r = await client.post("/threads", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["metadata"] == {"pair": "\U0001f600", "e": 100000.0}


# --- token claims (issue 14 item 8 and 9) ---


def _jwt_settings(db_url: str) -> Settings:
    return Settings(
        database_url=db_url,
        workers=0,
        auth="jwt",
        jwt_secret=HS_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
    )


@pytest.fixture
async def jwt_client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(_jwt_settings(db_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://gk") as c:
                yield c
        finally:
            await truncate_all(app.state.graphkeep.engine)


BAD_CLAIMS: list[dict[str, Any]] = [
    {"tenant": "ac" + NUL + "me"},
    {"tenant": SURROGATE},
    {"tenant": "   "},
    {"tenant": "acme\n"},
    {"tenant": "a\nb"},
    {"tenant": ""},
    {"tenant": "x" * 256},
    {"tenant": 42},
    {"sub": SURROGATE},
    {"sub": "a" + NUL},
    {"scope": 7},
    {"scope": {"read": True}},
    {"scope": "READ"},
    {"scope": "read:all"},
    {"scope": ""},
    {"scope": ["read", 1]},
]


async def test_malformed_claims_are_401_on_reads_and_writes(jwt_client: httpx.AsyncClient) -> None:
    good = {"Authorization": f"Bearer {hs_token(claims())}"}
    r = await jwt_client.post("/threads", json={"metadata": {"owner": "acme"}}, headers=good)
    assert r.status_code == 200
    failures = []
    for bad in BAD_CLAIMS:
        headers = {"Authorization": f"Bearer {hs_token(claims(**bad))}"}
        for method, path, body in (
            ("POST", "/threads", {}),
            ("POST", "/threads/search", {}),
            ("POST", "/runs/wait", {"assistant_id": "approval", "input": {"request": "x"}}),
        ):
            r = await jwt_client.request(method, path, json=body, headers=headers)
            if r.status_code != 401 or not isinstance(r.json().get("detail"), str):
                failures.append(f"{bad} {method} {path}: {r.status_code} {r.text[:100]}")
    assert not failures, "\n".join(failures)
    # nothing was created by any of them, and the good tenant sees its one thread
    r = await jwt_client.post("/threads/search", json={}, headers=good)
    assert [t["metadata"] for t in r.json()] == [{"owner": "acme"}]
    async with app_state(jwt_client).engine.connect() as conn:
        from sqlalchemy import func, select

        from app.db.tables import threads

        assert (await conn.execute(select(func.count()).select_from(threads))).scalar() == 1
    assert DEFAULT_TENANT != "acme"


async def test_read_scope_with_unknown_names_is_read_only(jwt_client: httpx.AsyncClient) -> None:
    headers = {"Authorization": f"Bearer {hs_token(claims(scope='openid read'))}"}
    assert (await jwt_client.post("/threads", json={}, headers=headers)).status_code == 403
    assert (await jwt_client.post("/threads/search", json={}, headers=headers)).status_code == 200
    headers = {"Authorization": f"Bearer {hs_token(claims(scope='openid write'))}"}
    assert (await jwt_client.post("/threads", json={}, headers=headers)).status_code == 200


# --- graph output storage cannot hold (issue 14: "graph output before it is persisted") ---


@pytest.fixture
async def run_client(db_url: str, tmp_path: Any) -> AsyncIterator[httpx.AsyncClient]:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"poison": "tests.graphs.hostile_graphs:poison"}}))
    app = create_app(
        Settings(database_url=db_url, config_file=config, workers=1, log_level="WARNING")
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gk", timeout=30
            ) as c:
                yield c
        finally:
            await truncate_all(app.state.graphkeep.engine)


@pytest.mark.parametrize("kind", ["nul", "surrogate", "surrogate_key", "deep"])
async def test_unstorable_graph_output_fails_the_run_and_the_thread_stays_readable(
    run_client: httpx.AsyncClient, kind: str
) -> None:
    c = run_client
    t = (await c.post("/threads", json={})).json()["thread_id"]
    r = await c.post(
        f"/threads/{t}/runs/wait", json={"assistant_id": "poison", "input": {"kind": kind}}
    )
    assert r.status_code == 200 and "__error__" in r.json(), r.text  # not stuck, not a 500
    runs = (await c.get(f"/threads/{t}/runs")).json()
    assert [run["status"] for run in runs] == ["error"]
    for path in ("", "/state", "/history", "/runs"):
        assert (await c.get(f"/threads/{t}{path}")).status_code == 200, path
    assert (await c.post(f"/threads/{t}/copy")).status_code == 200
    assert (await c.post("/threads/search", json={})).status_code == 200
    # the next run on the same thread works
    r = await c.post(
        f"/threads/{t}/runs/wait", json={"assistant_id": "poison", "input": {"kind": "fine"}}
    )
    assert r.json()["out"] == "ok", r.text

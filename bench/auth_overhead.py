"""What authentication costs per request: GET /threads/{id} under each credential kind.

In-process (httpx ASGI transport, no sockets), so the numbers are the server's own work:
mode `none` versus a JWT (HS256, RS256), an API key (one indexed lookup by SHA-256 digest) and
custom auth (examples/auth-owner-threads: a Python `@auth.authenticate` plus an `@auth.on`
owner filter, tested in SQL). Calls are interleaved round-robin so that noise hits every kind
alike. Prints the median per kind and its ratio to `none`.

`--search-users` adds the filtered thread search under custom auth: 10,000 then 100,000
threads of that many users (PostgreSQL), each size's median POST /threads/search of one user,
and the EXPLAIN of the query at 100,000 (the metadata GIN index of migration 0007).

    python bench/auth_overhead.py                      # temp SQLite file
    python bench/auth_overhead.py --calls 500 --database-url postgresql+asyncpg://...
    python bench/auth_overhead.py --database-url postgresql+asyncpg://... --search-users 1000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from jose import jwt

from app.auth.apikeys import create_api_key
from app.config import Settings
from app.db.access import read, transaction
from app.db.tables import threads
from app.db.types import utcnow
from app.main import create_app
from app.threads.queries import thread_row

SECRET = "bench-secret-" + "s" * 32
ROOT = Path(__file__).resolve().parent.parent
OWNER_EXAMPLE = ROOT / "examples" / "auth-owner-threads" / "langgraph.json"
CUSTOM_HEADERS = {"Authorization": "Bearer user1-token"}  # user "user1" of the example


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            yield app, client


def _rsa_pair(tmp: Path) -> tuple[str, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = tmp / "public.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


async def main(calls: int, database_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        url = database_url or f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
        private_pem, public_file = _rsa_pair(tmp)
        base = {"database_url": url, "workers": 0}
        jwt_settings = Settings(
            **base,
            auth="jwt",
            jwt_secret=SECRET,
            jwt_algorithms=["HS256", "RS256"],
            jwt_public_key_file=public_file,
        )
        claims = {"sub": "bench", "tenant_id": "bench", "exp": int(time.time()) + 3600}
        headers = {
            "jwt-hs256": {"Authorization": "Bearer " + jwt.encode(claims, SECRET, "HS256")},
            "jwt-rs256": {"Authorization": "Bearer " + jwt.encode(claims, private_pem, "RS256")},
        }
        async with (
            running(Settings(**base)) as (_, open_client),
            running(jwt_settings) as (jwt_app, auth_client),
            running(Settings(**base, config_file=OWNER_EXAMPLE)) as (_, custom_client),
        ):
            _, key = await create_api_key(jwt_app.state.graphkeep.engine, tenant_id="bench")
            headers["api-key"] = {"x-api-key": key}
            open_thread = (await open_client.post("/threads", json={})).json()["thread_id"]
            auth_thread = (
                await auth_client.post("/threads", json={}, headers=headers["jwt-hs256"])
            ).json()["thread_id"]
            custom_thread = (
                await custom_client.post("/threads", json={}, headers=CUSTOM_HEADERS)
            ).json()["thread_id"]
            kinds = {"none": (open_client, open_thread, {})} | {
                name: (auth_client, auth_thread, h) for name, h in headers.items()
            }
            kinds["custom"] = (custom_client, custom_thread, CUSTOM_HEADERS)
            samples: dict[str, list[float]] = {name: [] for name in kinds}
            for i in range(calls + 20):
                for name, (client, thread, h) in kinds.items():
                    start = time.perf_counter()
                    r = await client.get(f"/threads/{thread}", headers=h)
                    elapsed = time.perf_counter() - start
                    if r.status_code != 200:
                        sys.exit(f"{name}: {r.status_code} {r.text}")
                    if i >= 20:  # warm-up
                        samples[name].append(elapsed)
    baseline = statistics.median(samples["none"])
    print(f"GET /threads/{{id}}, {calls} calls per kind, in-process, {url.split(':')[0]}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"  {name:10s} median {median * 1000:7.3f} ms  ratio {median / baseline:5.2f}")


async def _add_threads(app: FastAPI, count: int, users: int, start: int) -> None:
    """`count` threads owned round-robin by `users` users (one multi-row insert per batch)."""
    engine = app.state.graphkeep.engine
    now = utcnow()
    for first in range(start, start + count, 5000):
        rows = [
            thread_row(
                tenant_id="default",
                thread_id=str(uuid.uuid4()),
                metadata={"owner": f"user{i % users}", "n": i},
                now=now,
            )
            for i in range(first, min(first + 5000, start + count))
        ]
        async with transaction(engine) as conn:
            await conn.execute(threads.insert(), rows)


async def search(calls: int, database_url: str, users: int) -> None:
    settings = Settings(database_url=database_url, workers=0, config_file=OWNER_EXAMPLE)
    print(f"POST /threads/search as one of {users} users (custom auth owner filter), {calls} calls")
    async with running(settings) as (app, client):
        engine = app.state.graphkeep.engine
        async with transaction(engine) as conn:
            await conn.exec_driver_sql("DELETE FROM threads WHERE tenant_id = 'default'")
        total = 0
        for size in (10_000, 100_000):
            await _add_threads(app, size - total, users, total)
            total = size
            # VACUUM (autocommit: outside a transaction) also flushes the GIN index's pending
            # list of fresh rows, as autovacuum does on a live server
            async with read(engine) as conn:
                await conn.exec_driver_sql("VACUUM ANALYZE threads")
            samples = []
            for i in range(calls + 10):
                start = time.perf_counter()
                r = await client.post("/threads/search", json={"limit": 10}, headers=CUSTOM_HEADERS)
                elapsed = time.perf_counter() - start
                if r.status_code != 200 or len(r.json()) != 10:
                    sys.exit(f"search: {r.status_code} {r.text[:200]}")
                if i >= 10:
                    samples.append(elapsed)
            print(f"  {size:>7,} threads  median {statistics.median(samples) * 1000:7.3f} ms")
        async with read(engine) as conn:
            plan = await conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, COSTS OFF) SELECT thread_id FROM threads "
                "WHERE tenant_id = 'default' AND metadata @> '{\"owner\": \"user1\"}'::jsonb "
                "ORDER BY created_at DESC, thread_id DESC LIMIT 10"
            )
            print("  EXPLAIN at 100,000:")
            for (line,) in plan:
                print(f"    {line}")
        async with transaction(engine) as conn:
            await conn.exec_driver_sql("DELETE FROM threads WHERE tenant_id = 'default'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--search-users", type=int, default=0)
    args = parser.parse_args()
    if args.search_users:
        if not args.database_url or not args.database_url.startswith("postgresql"):
            sys.exit("--search-users needs --database-url postgresql+asyncpg://...")
        asyncio.run(search(args.calls, args.database_url, args.search_users))
    else:
        asyncio.run(main(args.calls, args.database_url))

"""What authentication costs per request: GET /threads/{id} under each credential kind.

In-process (httpx ASGI transport, no sockets), so the numbers are the server's own work:
mode `none` versus a JWT (HS256, RS256) and an API key (one indexed lookup by SHA-256 digest).
Calls are interleaved round-robin so that noise hits every kind alike. Prints the median per
kind and its ratio to `none`.

    python bench/auth_overhead.py                      # temp SQLite file
    python bench/auth_overhead.py --calls 500 --database-url postgresql+asyncpg://...
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
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
from app.main import create_app

SECRET = "bench-secret-" + "s" * 32


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
        ):
            _, key = await create_api_key(jwt_app.state.graphkeep.engine, tenant_id="bench")
            headers["api-key"] = {"x-api-key": key}
            open_thread = (await open_client.post("/threads", json={})).json()["thread_id"]
            auth_thread = (
                await auth_client.post("/threads", json={}, headers=headers["jwt-hs256"])
            ).json()["thread_id"]
            kinds = {"none": (open_client, open_thread, {})} | {
                name: (auth_client, auth_thread, h) for name, h in headers.items()
            }
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.database_url))

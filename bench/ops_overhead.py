"""What observability costs per request, and what a scrape costs.

In-process (httpx ASGI transport, no sockets), so the numbers are the server's own work:
GET /threads/{id} through the full app versus the same app without the request-context and
metrics middlewares, interleaved call by call so that noise hits both alike. Also the median
/metrics scrape (render + queue/pool sampling) and the cost of one `observe_checkpoint_put`.
Prints medians and the ratio instrumented / bare.

    PYTHONPATH=. python bench/ops_overhead.py                       # temp SQLite file
    PYTHONPATH=. python bench/ops_overhead.py --calls 2000 --database-url postgresql+asyncpg://...
    PYTHONPATH=. python bench/ops_overhead.py --json-logs 2>/dev/null   # production logging
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
from fastapi import FastAPI

from app import metrics
from app.api.metrics_middleware import ObservabilityMiddleware
from app.config import Settings
from app.logging import configure as configure_logging
from app.main import create_app


@asynccontextmanager
async def running(settings: Settings, *, bare: bool) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings)
    if bare:
        app.user_middleware = [
            m for m in app.user_middleware if m.cls is not ObservabilityMiddleware
        ]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            yield client


async def _timed(client: httpx.AsyncClient, path: str) -> float:
    started = time.perf_counter()
    r = await client.get(path)
    elapsed = time.perf_counter() - started
    assert r.status_code == 200, r.text
    return elapsed


async def main(calls: int, database_url: str) -> None:
    settings = Settings(database_url=database_url, workers=0)
    async with running(settings, bare=False) as full, running(settings, bare=True) as bare:
        thread_id = (await full.post("/threads", json={})).json()["thread_id"]
        path = f"/threads/{thread_id}"
        for client in (full, bare):  # warm up
            for _ in range(50):
                await _timed(client, path)
        with_obs: list[float] = []
        without: list[float] = []
        for _ in range(calls):
            with_obs.append(await _timed(full, path))
            without.append(await _timed(bare, path))
        scrapes = [await _timed(full, "/metrics") for _ in range(max(calls // 20, 20))]

    started = time.perf_counter()
    n = 100_000
    for _ in range(n):
        metrics.observe_checkpoint_put(0.002, 4096)
    helper_ns = (time.perf_counter() - started) / n * 1e9

    med_with, med_without = statistics.median(with_obs), statistics.median(without)
    print(f"GET /threads/{{id}} x{calls} interleaved ({database_url.split(':')[0]})")
    print(f"  bare app             median {med_without * 1e6:8.1f} us")
    print(f"  with observability   median {med_with * 1e6:8.1f} us")
    print(f"  ratio with / bare    {med_with / med_without:.3f}")
    print(f"GET /metrics           median {statistics.median(scrapes) * 1e3:8.2f} ms")
    print(f"observe_checkpoint_put {helper_ns:8.0f} ns per call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--json-logs", action="store_true", help="log at INFO as JSON (production); stderr"
    )
    args = parser.parse_args()
    if args.json_logs:
        configure_logging(Settings(log_format="json", log_level="INFO"))
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        asyncio.run(main(args.calls, url))
    sys.exit(0)

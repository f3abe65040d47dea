"""SIGTERM on `graphkeep serve` with open streams (real processes, PostgreSQL).

uvicorn waits for open connections before running the lifespan shutdown, and an SSE stream
lasts as long as its run, so the workers' drain used to start only when uvicorn gave up on
the connections. Now SIGTERM starts the drain at once and cuts this process's open streams and
waits (clients reconnect elsewhere): the run goes back to pending at the next super-step
boundary, another process finishes it, and the signalled process exits well within its drain
deadline.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.conftest import migrated_pg_database
from tests.e2e.runs_fixtures import read_records
from tests.e2e.runs_server import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow]

ENV = {
    "GRAPHKEEP_LEASE_SECONDS": "2",
    "GRAPHKEEP_DRAIN_TIMEOUT_SECONDS": "20",
    "GRAPHKEEP_STREAM_KEEPALIVE_SECONDS": "1",
}


@pytest.fixture
def db_url() -> Iterator[str]:
    if __import__("os").environ.get("GRAPHKEEP_TEST_SKIP_POSTGRES") == "1":
        pytest.skip("GRAPHKEEP_TEST_SKIP_POSTGRES=1")
    with migrated_pg_database("gk_shutdown") as url:
        yield url


async def _read_sse(
    http: httpx.AsyncClient, path: str, headers: dict[str, str], lines: list[str]
) -> list[str]:
    """Raw SSE lines until the server ends or cuts the response (a cut is not raised)."""
    try:
        async with http.stream("GET", path, headers=headers) as r:
            assert r.status_code == 200, r.status_code
            lines.append("<open>")
            async for line in r.aiter_lines():
                lines.append(line)
    except httpx.TransportError:
        lines.append("<cut>")
    return lines


async def _until(predicate: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_sigterm_cuts_streams_drains_at_once_and_exits(db_url: str, tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    tag = f"sd-{uuid.uuid4().hex[:6]}"
    with (
        serve(db_url, tmp_path, workers=2, record_file=record, env=ENV, name="a") as a,
        serve(db_url, tmp_path, workers=2, record_file=record, env=ENV, name="b") as b,
    ):
        assert a.url is not None and b.url is not None
        client_a, client_b = get_client(url=a.url), get_client(url=b.url)
        tid = (await client_a.threads.create())["thread_id"]
        # created on A with a free slot: A executes it (direct dispatch)
        run = await client_a.runs.create(
            tid, "steps", input={"tag": tag, "sleep": 3.0}, stream_resumable=True,
            stream_mode=["updates"],
        )  # fmt: skip
        rid = run["run_id"]
        async with httpx.AsyncClient(base_url=a.url, timeout=60) as http:
            run_lines: list[str] = []
            thread_lines: list[str] = []
            join_path = f"/threads/{tid}/runs/{rid}/join"
            readers = [
                asyncio.create_task(
                    _read_sse(
                        http,
                        f"/threads/{tid}/runs/{rid}/stream",
                        {"Last-Event-ID": "0"},
                        run_lines,
                    )
                ),
                asyncio.create_task(_read_sse(http, f"/threads/{tid}/stream", {}, thread_lines)),
                asyncio.create_task(http.get(join_path)),
            ]
            await _until(lambda: [n for n, _ in read_records(record, tag)] == ["a"])
            # both streams are open and the run stream has its first events (with ids)
            await _until(lambda: "<open>" in thread_lines and any(
                line.startswith("id: ") for line in run_lines
            ))  # fmt: skip
            await asyncio.sleep(0.3)  # inside "b" (3 s)
            assert not any(t.done() for t in readers)
            signalled = time.monotonic()
            a.popen.send_signal(signal.SIGTERM)
            done, _ = await asyncio.wait(readers, timeout=3)
            cut_after = time.monotonic() - signalled
            assert len(done) == 3, f"streams still open {cut_after:.1f} s after SIGTERM"
            assert readers[0].result()[-1] == "<cut>"  # cut, not closed as if the run had ended
            assert readers[1].result()[-1] == "<cut>"
            join = readers[2]
            assert join.exception() is not None  # the wait body is cut too: the SDK retries
        # A drains at the end of "b" (the super-step boundary) and exits, far below its 20 s
        # drain deadline (before: uvicorn waited drain + 5 s for the open connections first)
        code = await asyncio.to_thread(a.popen.wait, 15)
        exited_after = time.monotonic() - signalled
        # 0, or killed by the SIGTERM that uvicorn re-raises once it has shut down
        assert code in (0, -signal.SIGTERM), a.output()[-3000:]
        assert exited_after < 10, f"exited {exited_after:.1f} s after SIGTERM"
        # B takes the run over and finishes it; the stream resumes there after the last id
        out = await client_b.runs.join(tid, rid)
        assert out["trail"] == ["a", "b", "c"]
        recs = read_records(record, tag)
        assert [n for n, _ in recs] == ["a", "b", "c"]  # each node exactly once
        assert recs[1][1] == a.popen.pid and recs[2][1] == b.popen.pid
        ids = [line[4:] for line in run_lines if line.startswith("id: ")]
        rest = [p async for p in client_b.runs.join_stream(tid, rid, last_event_id=ids[-1])]
        assert [p.event for p in rest][-1] == "updates"
        assert [int(p.id) for p in rest] == list(range(int(ids[-1]) + 1, int(rest[-1].id) + 1))
        assert "Exception in ASGI application" not in a.output()
        assert "unhandled error" not in a.output()
        assert "Traceback" not in a.output()

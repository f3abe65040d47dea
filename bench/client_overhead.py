"""graphkeep_client versus the official langgraph_sdk: per-call latency and SSE decoding.

Both sync clients call the same live server, interleaved call by call so that server noise
hits both alike; the SSE part decodes the same synthetic stream offline (pure client CPU).
Prints medians and the ratio graphkeep_client / langgraph_sdk (below 1 = faster).

    python bench/client_overhead.py                 # starts its own server (temp SQLite)
    python bench/client_overhead.py --url http://127.0.0.1:8123 --calls 300
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from langgraph_sdk import get_sync_client
from langgraph_sdk.sse import BytesLineDecoder
from langgraph_sdk.sse import SSEDecoder as SdkDecoder

from graphkeep_client import Client
from graphkeep_client._sse import SSEDecoder

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def live_server() -> Iterator[str]:
    """`graphkeep serve` with the example graphs on a free port and a temp SQLite file."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
        env |= {
            "GRAPHKEEP_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/bench.db",
            "GRAPHKEEP_LOG_LEVEL": "WARNING",
        }
        cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1"]
        proc = subprocess.Popen([*cmd, "--port", str(port)], cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(30)


def paired(
    calls: int, ours: Callable[[], object], theirs: Callable[[], object]
) -> tuple[float, float]:
    """Median seconds of each callable, alternating which one goes first."""
    a: list[float] = []
    b: list[float] = []
    for i in range(calls):
        order = [(ours, a), (theirs, b)] if i % 2 == 0 else [(theirs, b), (ours, a)]
        for fn, out in order:
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def synthetic_stream(events: int) -> bytes:
    out = []
    for i in range(events):
        msg = [{"type": "ai", "content": "token " * (i % 50), "id": "m1", "tool_calls": []}]
        out.append(f"id: {i}\r\nevent: messages/partial\r\ndata: {json.dumps(msg)}\r\n\r\n")
    return "".join(out).encode()


def decode_ours(data: bytes, chunk: int) -> int:
    decoder, n = SSEDecoder(), 0
    for i in range(0, len(data), chunk):
        n += len(decoder.feed(data[i : i + chunk]))
    return n + len(decoder.flush())


def decode_theirs(data: bytes, chunk: int) -> int:
    lines, decoder, n = BytesLineDecoder(), SdkDecoder(), 0
    for i in range(0, len(data), chunk):
        for line in lines.decode(data[i : i + chunk]):
            if decoder.decode(bytes(line)) is not None:
                n += 1
    return n


def report(name: str, ours: float, theirs: float, unit: str = "ms") -> None:
    scale = 1000.0
    print(
        f"{name:<34} graphkeep_client {ours * scale:8.2f} {unit}   "
        f"langgraph_sdk {theirs * scale:8.2f} {unit}   ratio {ours / theirs:5.2f}"
    )


def run(url: str, calls: int) -> None:
    ours = Client(url)
    theirs = get_sync_client(url=url, api_key=None)
    thread = ours.threads.create()
    tid = thread.thread_id
    ours.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": "warm up"}]})

    report(
        "threads.get",
        *paired(calls, lambda: ours.threads.get(tid), lambda: theirs.threads.get(tid)),
    )
    report(
        "threads.get_state",
        *paired(calls, lambda: ours.threads.get_state(tid), lambda: theirs.threads.get_state(tid)),
    )
    report(
        "store.search",
        *paired(
            calls,
            lambda: ours.store.search(("bench",)),
            lambda: theirs.store.search_items(("bench",)),
        ),
    )
    msg = {"messages": [{"role": "user", "content": "stream please"}]}
    streams = max(10, calls // 10)
    report(
        f"runs.stream agent ({streams} runs)",
        *paired(
            streams,
            lambda: list(ours.runs.stream(None, "agent", input=msg, stream_mode="messages")),
            lambda: list(theirs.runs.stream(None, "agent", input=msg, stream_mode="messages")),
        ),
    )
    data = synthetic_stream(5000)
    for chunk in (64, 4096):
        assert decode_ours(data, chunk) == decode_theirs(data, chunk) == 5000
        report(
            f"SSE decode 5000 events ({len(data) // 1024} KiB, {chunk} B chunks)",
            *paired(
                9, lambda c=chunk: decode_ours(data, c), lambda c=chunk: decode_theirs(data, c)
            ),
        )
    ours.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if args.url:
        run(args.url, args.calls)
    else:
        with live_server() as url:
            run(url, args.calls)


if __name__ == "__main__":
    main()

"""`graphkeep worker` exposes its own /metrics (it has no API) and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_worker_serves_metrics_and_exits_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")},
        "GRAPHKEEP_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}",
        "GRAPHKEEP_WORKER_METRICS_PORT": str(port),
        "GRAPHKEEP_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            text = r.text
            break
        assert "graphkeep_runs_finished_total" in text
        assert "graphkeep_checkpoint_put_duration_seconds" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

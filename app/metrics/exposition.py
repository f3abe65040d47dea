"""Exposition: the text format for /metrics, the worker's own metrics server, and
prometheus-client's multiprocess mode (see app/metrics/__init__.py)."""

from __future__ import annotations

import hmac
import os
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from app.metrics.definitions import ALL_METRICS, REGISTRY

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def multiprocess_dir() -> str | None:
    """The multiprocess directory when multiprocess mode is on, else None."""
    return os.environ.get(MULTIPROC_ENV) or None


if multiprocess_dir() is None:
    # CPU, memory and file descriptors of this process; meaningless summed across processes,
    # so only in single-process mode.
    ProcessCollector(registry=REGISTRY)


def render() -> bytes:
    """The text exposition of every graphkeep metric (all processes in multiprocess mode)."""
    path = multiprocess_dir()
    if path is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def start_http_server(port: int, addr: str, token: str | None = None) -> Callable[[], None]:
    """Serve /metrics from a background thread (for `graphkeep worker`, which has no API);
    returns a function that stops it. With `token`, requests need `Authorization: Bearer
    <token>` (GRAPHKEEP_METRICS_TOKEN), as on the API's /metrics."""
    registry = REGISTRY
    path = multiprocess_dir()
    if path is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    metrics_app = make_wsgi_app(registry)

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        scheme, _, given = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
        if token and not (
            scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode(), token.encode())
        ):
            headers = [("Content-Type", "application/json"), ("WWW-Authenticate", "Bearer")]
            start_response("401 Unauthorized", headers)
            return [b'{"detail": "a valid metrics bearer token is required"}']
        return metrics_app(environ, start_response)

    server = make_server(addr, port, guarded, ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="worker-metrics", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop


def mark_process_dead(pid: int) -> None:
    """Drop a finished process's live gauges (call when a worker process exits)."""
    path = multiprocess_dir()
    if path is not None:
        multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


def exposed_names() -> set[str]:
    """Every sample name the metrics above can expose (what a dashboard may query)."""
    suffixes = {
        "counter": ("_total",),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count"),
    }
    names: set[str] = set()
    for metric in ALL_METRICS:
        for family in metric.describe():  # the public view of a family's name and type
            for suffix in suffixes[family.type]:
                names.add(family.name + suffix)
    return names

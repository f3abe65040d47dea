"""Prometheus metrics: every graphkeep metric is defined here (the one allowed global).

Conventions: a `graphkeep_` prefix, base units (`_seconds`, `_bytes`), counters end in
`_total`, and labels stay low-cardinality (route template, method, status, run status,
graph_id, store op), never an id.

Several processes (uvicorn replicas, `graphkeep worker`) share one view through
prometheus-client's multiprocess mode: when `PROMETHEUS_MULTIPROC_DIR` is set in the
environment *before the process starts*, every process writes its samples to files in that
directory and `render()` aggregates them. Gauges therefore declare how to combine processes
(`livesum` for per-process quantities such as pool usage, `livemax` for values every process
samples from the shared database, such as queue depth).

Other modules call the small `observe_*` / `count_*` helpers below rather than touching the
metric objects, so names and labels are decided in one place.
"""

from __future__ import annotations

import hmac
import os
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import make_server

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler, make_wsgi_app

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Metrics live on a registry of our own so the exposition holds exactly graphkeep's metrics
# (plus process metrics in single-process mode) whatever else the interpreter imported.
REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_SIZE_BUCKETS = tuple(float(2**p) for p in range(8, 27, 2))  # 256 B .. 64 MiB
_HISTORY_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# Counting a thread's history stops here: past the top bucket the exact length adds nothing.
HISTORY_COUNT_CAP = _HISTORY_BUCKETS[-1] + 1

# --------------------------------------------------------------------------- HTTP

HTTP_REQUESTS = Counter(
    "graphkeep_http_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "graphkeep_http_request_duration_seconds",
    "Time from request start to the end of the response body (streams: until they close).",
    ["route", "method", "status"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
DB_UNAVAILABLE = Counter(
    "graphkeep_db_unavailable_total",
    "Requests answered 503 because the database was unreachable.",
    registry=REGISTRY,
)

# --------------------------------------------------------------------------- runs

RUNS_CREATED = Counter(
    "graphkeep_runs_created_total",
    "Runs accepted into the queue.",
    ["graph_id"],
    registry=REGISTRY,
)
RUNS_FINISHED = Counter(
    "graphkeep_runs_finished_total",
    "Runs that reached a final status.",
    ["graph_id", "status"],
    registry=REGISTRY,
)
RUN_DURATION = Histogram(
    "graphkeep_run_duration_seconds",
    "Execution time of a run attempt, from claim to final status.",
    ["graph_id", "status"],
    buckets=_RUN_BUCKETS,
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "graphkeep_run_queue_depth",
    "Pending runs in the queue, sampled from the database.",
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
RUNS_RUNNING = Gauge(
    "graphkeep_runs_running",
    "Runs currently running, sampled from the database.",
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
QUEUE_WAIT = Histogram(
    "graphkeep_run_queue_wait_seconds",
    "Time a run waited between becoming eligible and being claimed by a worker.",
    ["graph_id"],
    buckets=_RUN_BUCKETS,
    registry=REGISTRY,
)
RUNS_RECOVERED = Counter(
    "graphkeep_runs_recovered_total",
    "Runs claimed again after their worker lost its lease (crash recovery).",
    ["graph_id"],
    registry=REGISTRY,
)
RESUME_FAILURES = Counter(
    "graphkeep_run_resume_failures_total",
    "Recovered or drained runs that could not be resumed from their last checkpoint.",
    ["graph_id"],
    registry=REGISTRY,
)
FENCED_WRITES_REFUSED = Counter(
    "graphkeep_run_fenced_writes_refused_total",
    "Writes of a run attempt refused because a newer attempt owns the run (app/runs/fencing.py).",
    ["what"],
    registry=REGISTRY,
)
RUNS_GIVEN_UP = Counter(
    "graphkeep_runs_given_up_total",
    "Runs settled `error` because their attempts ran out (GRAPHKEEP_MAX_ATTEMPTS), by reason.",
    ["graph_id", "reason"],
    registry=REGISTRY,
)
DRAINS = Counter(
    "graphkeep_run_drains_total",
    "Runs asked to drain at a super-step boundary (graceful shutdown).",
    ["graph_id"],
    registry=REGISTRY,
)

# --------------------------------------------------------------------------- persistence

CHECKPOINT_PUT = Histogram(
    "graphkeep_checkpoint_put_duration_seconds",
    "Latency of writing one checkpoint (with its new channel blobs).",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
CHECKPOINT_SIZE = Histogram(
    "graphkeep_checkpoint_size_bytes",
    "Serialized size of one checkpoint write (checkpoint plus new blobs).",
    buckets=_SIZE_BUCKETS,
    registry=REGISTRY,
)
CHECKPOINT_WRITES_PUT = Histogram(
    "graphkeep_checkpoint_writes_put_duration_seconds",
    "Latency of saving a task's pending writes.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
THREAD_HISTORY = Histogram(
    "graphkeep_thread_history_length",
    "Checkpoints in a thread's history, observed when a run on it finishes.",
    buckets=_HISTORY_BUCKETS,
    registry=REGISTRY,
)
STORE_OPERATION = Histogram(
    "graphkeep_store_operation_duration_seconds",
    "Latency of Store calls by op (get, put, delete, search, list_namespaces, batch, sweep).",
    ["op"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)

# --------------------------------------------------------------------------- serving

STREAM_SUBSCRIBERS = Gauge(
    "graphkeep_stream_subscribers",
    "Open stream subscriptions (SSE clients and joins) in this deployment.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DB_POOL_IN_USE = Gauge(
    "graphkeep_db_pool_connections_in_use",
    "Database connections checked out of the pool, sampled at scrape time.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DB_POOL_SIZE = Gauge(
    "graphkeep_db_pool_connections",
    "Connections currently held by the pool (in use plus idle), sampled at scrape time.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)

# --------------------------------------------------------------------------- retention

RETENTION_REMOVED = Counter(
    "graphkeep_retention_removed_total",
    "Objects removed or pruned by the retention sweepers, by kind.",
    ["kind"],
    registry=REGISTRY,
)
RETENTION_SWEEP = Histogram(
    "graphkeep_retention_sweep_duration_seconds",
    "Duration of one retention sweep.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
RETENTION_FAILURES = Counter(
    "graphkeep_retention_sweep_failures_total",
    "Retention sweeps that failed (retried at the next interval).",
    registry=REGISTRY,
)

# --------------------------------------------------------------------------- webhooks

WEBHOOK_DELIVERIES = Counter(
    "graphkeep_webhook_deliveries",
    "Run webhooks by outcome after their retries (delivered | failed).",
    ["outcome"],
    registry=REGISTRY,
)
# --------------------------------------------------------------------------- crons

CRON_FIRINGS = Counter(
    "graphkeep_cron_firings_total",
    "Cron due times handled by the scheduler, by outcome (fired, skipped_busy, "
    "assistant_deleted, thread_deleted, failed, ended).",
    ["outcome"],
    registry=REGISTRY,
)
CRON_LAG = Histogram(
    "graphkeep_cron_lag_seconds",
    "Scheduling lag: from a cron's due time to its run being created.",
    buckets=_LATENCY_BUCKETS + (30, 60, 300),
    registry=REGISTRY,
)
CRONS_DUE = Gauge(
    "graphkeep_crons_due",
    "Enabled crons due but not yet claimed (sampled by each idle scheduler).",
    multiprocess_mode="livemax",
    registry=REGISTRY,
)

# Metric families a dashboard may query (the base names, before _bucket/_sum/_count).
ALL_METRICS = (
    HTTP_REQUESTS,
    HTTP_DURATION,
    DB_UNAVAILABLE,
    RUNS_CREATED,
    RUNS_FINISHED,
    RUN_DURATION,
    QUEUE_DEPTH,
    RUNS_RUNNING,
    QUEUE_WAIT,
    RUNS_RECOVERED,
    RESUME_FAILURES,
    FENCED_WRITES_REFUSED,
    RUNS_GIVEN_UP,
    DRAINS,
    CHECKPOINT_PUT,
    CHECKPOINT_SIZE,
    CHECKPOINT_WRITES_PUT,
    THREAD_HISTORY,
    STORE_OPERATION,
    STREAM_SUBSCRIBERS,
    DB_POOL_IN_USE,
    DB_POOL_SIZE,
    RETENTION_REMOVED,
    RETENTION_SWEEP,
    RETENTION_FAILURES,
    WEBHOOK_DELIVERIES,
    CRON_FIRINGS,
    CRON_LAG,
    CRONS_DUE,
)


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

    server = make_server(addr, port, guarded, ThreadingWSGIServer, handler_class=_SilentHandler)
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


# --------------------------------------------------------------------------- helpers


def _graph(graph_id: str | None) -> str:
    return graph_id or "unknown"


# (route, method, status) -> the two labelled children: `labels()` validates the labels and
# takes the metric's lock on every call. Bounded: routes are templates (or one "unmatched").
_HTTP_CHILDREN: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def observe_http_request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request; `route` must be a template such as /threads/{thread_id}."""
    key = (route, method, status)
    children = _HTTP_CHILDREN.get(key)
    if children is None:
        labels = (route, method, str(status))
        children = (HTTP_REQUESTS.labels(*labels), HTTP_DURATION.labels(*labels))
        _HTTP_CHILDREN[key] = children
    children[0].inc()
    children[1].observe(seconds)


def count_db_unavailable() -> None:
    """A request answered 503 because the database was unreachable."""
    DB_UNAVAILABLE.inc()


def count_run_created(graph_id: str | None) -> None:
    """A run was accepted into the queue."""
    RUNS_CREATED.labels(_graph(graph_id)).inc()


def observe_run_finished(graph_id: str | None, status: str, seconds: float | None) -> None:
    """A run reached a final status; `seconds` is its execution time when known."""
    RUNS_FINISHED.labels(_graph(graph_id), status).inc()
    if seconds is not None:
        RUN_DURATION.labels(_graph(graph_id), status).observe(max(seconds, 0.0))


def observe_queue_wait(graph_id: str | None, seconds: float) -> None:
    """A worker claimed a run that had been eligible for `seconds`."""
    QUEUE_WAIT.labels(_graph(graph_id)).observe(max(seconds, 0.0))


def set_queue_depth(pending: int, running: int | None = None) -> None:
    """Record the sampled queue depth (and running runs when known)."""
    QUEUE_DEPTH.set(pending)
    if running is not None:
        RUNS_RUNNING.set(running)


def count_run_recovered(graph_id: str | None) -> None:
    """A run whose lease expired was claimed again."""
    RUNS_RECOVERED.labels(_graph(graph_id)).inc()


def count_resume_failure(graph_id: str | None) -> None:
    """A recovered or drained run could not be resumed."""
    RESUME_FAILURES.labels(_graph(graph_id)).inc()


def count_fenced_refusal(what: str) -> None:
    """A superseded run attempt's write (checkpoint, writes, events, settle, ...) was refused."""
    FENCED_WRITES_REFUSED.labels(what).inc()


def count_run_given_up(graph_id: str | None, reason: str) -> None:
    """A run ran out of attempts and was settled `error` (reason: a short error class name)."""
    RUNS_GIVEN_UP.labels(_graph(graph_id), reason[:64]).inc()


def count_drain(graph_id: str | None) -> None:
    """A running run was asked to drain."""
    DRAINS.labels(_graph(graph_id)).inc()


def observe_checkpoint_put(seconds: float, nbytes: int) -> None:
    """One checkpoint written in `seconds`, `nbytes` serialized (checkpoint plus blobs)."""
    CHECKPOINT_PUT.observe(seconds)
    CHECKPOINT_SIZE.observe(nbytes)


def observe_checkpoint_writes(seconds: float) -> None:
    """One batch of pending writes saved."""
    CHECKPOINT_WRITES_PUT.observe(seconds)


def observe_thread_history(length: int) -> None:
    """A thread's history length (checkpoints), observed when a run on it ends."""
    THREAD_HISTORY.observe(length)


def observe_store_batch(ops: list[str], seconds: float) -> None:
    """One Store batch: labelled by its op when all ops are of one kind, else `batch`."""
    kinds = set(ops)
    STORE_OPERATION.labels(kinds.pop() if len(kinds) == 1 else "batch").observe(seconds)


def observe_store_operation(op: str, seconds: float) -> None:
    """One Store operation (`get`, `put`, `delete`, `search`, `list_namespaces`, `sweep`)."""
    STORE_OPERATION.labels(op).observe(seconds)


def stream_subscribed() -> None:
    """A stream subscriber attached."""
    STREAM_SUBSCRIBERS.inc()


def stream_unsubscribed() -> None:
    """A stream subscriber left."""
    STREAM_SUBSCRIBERS.dec()


def set_db_pool(in_use: int, held: int) -> None:
    """Record this process's pool usage (checked out, and held in total)."""
    DB_POOL_IN_USE.set(in_use)
    DB_POOL_SIZE.set(held)


def count_retention_removed(kind: str, count: int) -> None:
    """Retention removed `count` objects of `kind` (threads_deleted, threads_pruned, ...)."""
    if count > 0:
        RETENTION_REMOVED.labels(kind).inc(count)


def observe_retention_sweep(seconds: float, *, failed: bool) -> None:
    """One retention sweep finished (or failed)."""
    RETENTION_SWEEP.observe(seconds)
    if failed:
        RETENTION_FAILURES.inc()


def count_webhook(outcome: str) -> None:
    """One run webhook finished its delivery attempts."""
    WEBHOOK_DELIVERIES.labels(outcome).inc()


def observe_cron_firing(outcome: str, lag_seconds: float) -> None:
    """The scheduler handled one due time (lag: due time -> run created)."""
    CRON_FIRINGS.labels(outcome).inc()
    if outcome == "fired":
        CRON_LAG.observe(lag_seconds)


def set_crons_due(count: int) -> None:
    CRONS_DUE.set(count)


def exposed_names() -> set[str]:
    """Every sample name the metrics above can expose (what a dashboard may query)."""
    suffixes = {
        "counter": ("_total",),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count"),
    }
    names: set[str] = set()
    for metric in ALL_METRICS:
        base: str = metric._name
        for suffix in suffixes[metric._type]:
            names.add(base + suffix)
    return names

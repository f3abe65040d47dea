"""Every graphkeep metric family (the one allowed global) and the registry they live on.

Conventions in app/metrics/__init__.py. Other modules record through the helpers in
app/metrics/record.py (re-exported as `app.metrics.observe_*` / `count_*`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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

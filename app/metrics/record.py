"""The recording helpers: other modules call these rather than touching the metric
objects, so names and labels are decided in one place (app/metrics/definitions.py)."""

from __future__ import annotations

from typing import Any

from app.metrics.definitions import (
    CHECKPOINT_PUT,
    CHECKPOINT_SIZE,
    CHECKPOINT_WRITES_PUT,
    CRON_FIRINGS,
    CRON_LAG,
    CRONS_DUE,
    DB_POOL_IN_USE,
    DB_POOL_SIZE,
    DB_UNAVAILABLE,
    DRAINS,
    FENCED_WRITES_REFUSED,
    HTTP_DURATION,
    HTTP_REQUESTS,
    QUEUE_DEPTH,
    QUEUE_WAIT,
    RESUME_FAILURES,
    RETENTION_FAILURES,
    RETENTION_REMOVED,
    RETENTION_SWEEP,
    RUN_DURATION,
    RUNS_CREATED,
    RUNS_FINISHED,
    RUNS_GIVEN_UP,
    RUNS_RECOVERED,
    RUNS_RUNNING,
    STORE_OPERATION,
    STREAM_SUBSCRIBERS,
    THREAD_HISTORY,
    WEBHOOK_DELIVERIES,
)


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

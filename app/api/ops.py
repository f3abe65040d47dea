"""Operations endpoints: Prometheus `/metrics` and the readiness probe `/ready`."""

from __future__ import annotations

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from app import metrics
from app.api.auth import metrics_token_ok
from app.api.deps import AppStateDep
from app.api.routing import resource_router
from app.errors import Unauthorized
from app.ops.health import check_readiness
from app.ops.sampler import sample_pool, sample_queue

router = resource_router("system")


def _check_metrics_token(request: Request, state: AppStateDep) -> None:
    # The auth middleware guards /metrics already; checking here too keeps the endpoint safe
    # even if it is ever mounted without that middleware.
    token = state.settings.metrics_token
    expected = token.get_secret_value() if token is not None else None
    if not metrics_token_ok(expected, request.headers.get("authorization")):
        raise Unauthorized("a valid metrics bearer token is required")


@router.get("/metrics", operation_id="metrics", include_in_schema=False)
async def prometheus_metrics(request: Request, state: AppStateDep) -> Response:
    """Prometheus text exposition (every process's samples in multiprocess mode)."""
    _check_metrics_token(request, state)
    sample_pool(state.engine)
    await sample_queue(state.engine, timeout_seconds=state.settings.db_timeout_seconds)
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


@router.get("/ready", operation_id="ready")
async def ready(state: AppStateDep) -> JSONResponse:
    """Readiness: 200 when the database answers and its schema is at head, else 503."""
    result = await check_readiness(state.engine, timeout_seconds=state.settings.db_timeout_seconds)
    body: dict[str, object] = {
        "ready": result.ready,
        "database": result.database,
        "schema_at_head": result.schema_at_head,
    }
    if result.detail:
        body["detail"] = result.detail
    if result.ready:
        return JSONResponse(body)
    return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})

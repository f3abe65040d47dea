"""openapi.json as the server really answers: one error shape, every error status, uuid
path ids, SSE content types, and the 405 behaviour (schemathesis `--checks all` holds the
server to it).

FastAPI documents a 422 with its `HTTPValidationError` array; graphkeep answers every error
as `{"detail": "<message>"}` (the official client reads `detail`), so the generated spec is
rewritten once here rather than per route.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.db.storable import MAX_ID_CHARS

ERROR_SCHEMA = "ErrorResponse"
# status -> when it is answered (documented on every operation: each can happen anywhere)
ERROR_STATUSES: dict[str, str] = {
    "400": "Malformed request (a body that is not UTF-8 JSON, a value storage cannot hold)",
    "401": "Missing or invalid credentials",
    "403": "The credential is read-only",
    "404": "No such resource for this caller (also another tenant's)",
    "409": "Conflict: the resource exists or is busy",
    "413": "Request body or value over the configured limit",
    "422": "Invalid request: the `detail` string names the field and the rule",
    "503": "The database is unavailable; retry after `Retry-After` seconds",
}
UUID_PATH_PARAMS = frozenset({"thread_id", "run_id"})
SSE = "text/event-stream"
METHODS_NOTE = (
    "\n\nA method a path does not document answers 405 with an `Allow` header listing the "
    "path's documented methods; OPTIONS answers the same unless CORS is configured, in "
    "which case preflight requests get the CORS answer. Every error body is "
    '`{"detail": "<message>"}`.'
)


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}
        },
    }


def rewrite(spec: dict[str, Any]) -> dict[str, Any]:
    """The FastAPI-generated `spec` made true to the answers (in place; returned)."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas[ERROR_SCHEMA] = {
        "title": ERROR_SCHEMA,
        "type": "object",
        "required": ["detail"],
        "properties": {"detail": {"type": "string", "title": "Detail"}},
    }
    spec.setdefault("info", {})["description"] = (
        spec["info"].get("description") or ""
    ) + METHODS_NOTE
    for path, item in spec.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERROR_STATUSES.items():
                responses[status] = _error_response(description)
            for param in operation.get("parameters", []):
                if param.get("in") == "path" and param.get("name") in UUID_PATH_PARAMS:
                    param["schema"] = {
                        **param.get("schema", {}),
                        "type": "string",
                        "format": "uuid",
                    }
                elif param.get("in") == "path":
                    param["schema"] = {"maxLength": MAX_ID_CHARS, **param.get("schema", {})}
            ok = responses.get("200")
            if path.endswith("/stream") and ok is not None:
                ok["content"] = {SSE: {"schema": {"type": "string"}}}
                ok["description"] = "Server-sent events (SSE), one JSON `data:` line per event"
    return spec


def with_security(spec: dict[str, Any], auth_openapi: dict[str, Any] | None) -> dict[str, Any]:
    """langgraph.json's `auth.openapi` (`securitySchemes`, `security`) merged into the spec,
    as the official server documents a custom auth handler's credentials in /docs."""
    if not auth_openapi:
        return spec
    schemes = auth_openapi.get("securitySchemes")
    if isinstance(schemes, dict):
        spec.setdefault("components", {}).setdefault("securitySchemes", {}).update(schemes)
    security = auth_openapi.get("security")
    if isinstance(security, list):
        spec["security"] = security
    return spec


def install_openapi(app: FastAPI, auth_openapi: dict[str, Any] | None = None) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = with_security(rewrite(spec), auth_openapi)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

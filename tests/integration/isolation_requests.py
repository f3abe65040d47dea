"""Minimal valid requests for any operation in the OpenAPI spec (for the isolation matrix).

A body holds only the schema's required fields, with harmless values; fields that name a
tenant-owned resource (assistant_id, thread_id, ...) get tenant A's ids, so every request B
sends points at A's data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.integration.isolation_support import Seed

# body fields that refer to a resource, and the seed id that fills them
ID_FIELDS = {
    "assistant_id": "assistant_id",
    "thread_id": "thread_id",
    "run_id": "run_id",
    "checkpoint_id": "checkpoint_id",
}
ID_LIST_FIELDS = {"thread_ids": "thread_id", "run_ids": "pending_run_id", "ids": "thread_id"}
MAX_DEPTH = 6


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def example(spec: dict[str, Any], schema: dict[str, Any], seed: Seed, depth: int = 0) -> Any:
    """A small value that validates against `schema` (required members only)."""
    schema = _resolve(spec, schema)
    if depth > MAX_DEPTH:
        return None
    for combo in ("anyOf", "oneOf"):
        if combo in schema:
            options = [s for s in schema[combo] if _resolve(spec, s).get("type") != "null"]
            return example(spec, options[0], seed, depth + 1) if options else None
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = example(spec, part, seed, depth + 1)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        out: dict[str, Any] = {}
        for name in schema.get("required", []):
            prop = schema.get("properties", {}).get(name, {})
            out[name] = field_value(spec, name, prop, seed, depth + 1)
        return out
    if kind == "array":
        count = schema.get("minItems", 0)
        return [example(spec, schema.get("items", {}), seed, depth + 1) for _ in range(count)]
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "string":
        return "x" * max(int(schema.get("minLength", 1)), 1)
    return {}


def field_value(
    spec: dict[str, Any], name: str, prop: dict[str, Any], seed: Seed, depth: int
) -> Any:
    """A value for one named field: A's id for id fields, else a schema example."""
    if name in ID_FIELDS and ID_FIELDS[name] in seed.ids:
        return seed.ids[ID_FIELDS[name]]
    if name in ID_LIST_FIELDS and ID_LIST_FIELDS[name] in seed.ids:
        return [seed.ids[ID_LIST_FIELDS[name]]]
    if name in {"namespace", "namespace_prefix"}:
        return list(seed.namespace)
    if name == "key":
        return seed.key
    if name == "graph_id":
        return "agent"
    if name == "value":
        return {"b": 1}
    if name == "schedule":
        return "*/5 * * * *"  # a valid cron: B's request must fail on A's ids, not the schedule
    return example(spec, prop, seed, depth)


def body_for(spec: dict[str, Any], op: dict[str, Any], seed: Seed) -> Any:
    """The request body for an operation, or None if it takes none."""
    content = (op.get("requestBody") or {}).get("content", {})
    schema = (content.get("application/json") or {}).get("schema")
    if schema is None:
        return None
    return example(spec, schema, seed)


def query_for(op: dict[str, Any], seed: Seed | None = None) -> dict[str, Any]:
    """Required query parameters with simple values; A's namespace and key wherever taken."""
    params: dict[str, Any] = {}
    for p in op.get("parameters", []):
        if p.get("in") != "query":
            continue
        name = p["name"]
        if name == "namespace" and seed is not None:
            params[name] = ".".join(seed.namespace)
        elif name == "key" and seed is not None:
            params[name] = seed.key
        elif p.get("required"):
            params[name] = "x"
    return params

"""Graph introspection for assistants: JSON schemas, subgraphs and the drawable graph.

Each call builds the assistant's graph with a read runtime (`assistants.read`), no
checkpointer and no store: only the structure is needed.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import TypeAdapter

from app.assistants.schemas import Assistant, GraphSchemas, JSONObject
from app.assistants.service import AssistantService, resolve_assistant_id
from app.errors import ValidationFailed
from app.graphs.registry import GraphRegistry


def _schema(getter: Any) -> JSONObject | None:
    try:
        result = getter()
    except Exception:  # a schema LangGraph cannot generate is null, by contract
        return None
    return result if isinstance(result, dict) else None


def _graph_schemas(graph: Any, graph_id: str) -> GraphSchemas:
    state_type = getattr(getattr(graph, "builder", None), "state_schema", None)
    return GraphSchemas(
        graph_id=graph_id,
        input_schema=_schema(graph.get_input_jsonschema),
        output_schema=_schema(graph.get_output_jsonschema),
        state_schema=(
            _schema(lambda: TypeAdapter(state_type).json_schema())
            if state_type is not None
            else None
        ),
        config_schema=_schema(graph.get_config_jsonschema),
        context_schema=_schema(graph.get_context_jsonschema),
    )


def _structure_of(assistant: Assistant, graphs: GraphRegistry) -> AbstractAsyncContextManager[Any]:
    """The assistant's graph built for reading its structure (`assistants.read`)."""
    return graphs.open(
        assistant.graph_id,
        config={"configurable": dict(assistant.context)},
        checkpointer=None,
        store=None,
        access_context="assistants.read",
    )


async def get_subgraphs(
    assistants: AssistantService,
    *,
    tenant_id: str,
    assistant_id: str,
    namespace: str | None,
    recurse: bool,
    graphs: GraphRegistry,
) -> dict[str, JSONObject]:
    """Schemas of the graph's subgraphs by namespace (LangGraph `aget_subgraphs`)."""
    assistant = await assistants.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)
    async with _structure_of(assistant, graphs) as graph:
        return {
            ns: _graph_schemas(subgraph, assistant.graph_id).model_dump(exclude={"graph_id"})
            async for ns, subgraph in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
        }


async def get_schemas(
    assistants: AssistantService, *, tenant_id: str, assistant_id: str, graphs: GraphRegistry
) -> GraphSchemas:
    assistant = await assistants.get_assistant(tenant_id=tenant_id, assistant_id=assistant_id)
    async with _structure_of(assistant, graphs) as graph:
        return _graph_schemas(graph, assistant.graph_id)


def _parse_xray(xray: str | None) -> bool | int:
    if xray is None or xray.lower() in ("false", "0", "no", ""):
        return False
    if xray.lower() in ("true", "yes"):
        return True
    try:
        depth = int(xray)
    except ValueError:
        raise ValidationFailed(
            f"xray: expected true, false or a positive integer, not {xray!r}"
        ) from None
    if depth <= 0:
        raise ValidationFailed("xray: must be a positive integer")
    return depth


async def get_graph_drawing(
    assistants: AssistantService,
    *,
    tenant_id: str,
    assistant_id: str,
    xray: str | None,
    graphs: GraphRegistry,
) -> JSONObject:
    """LangGraph's drawable graph as JSON (node `data.id` removed, as the official server)."""
    depth = _parse_xray(xray)
    resolved = resolve_assistant_id(assistant_id, graphs=graphs)
    assistant = await assistants.get_assistant(tenant_id=tenant_id, assistant_id=resolved)
    async with _structure_of(assistant, graphs) as graph:
        drawable = await graph.aget_graph(xray=depth)
    result: JSONObject = drawable.to_json()
    for node in result.get("nodes", []):
        data = node.get("data")
        if isinstance(data, dict):
            data.pop("id", None)
    return result

"""The pure parts of the MCP and A2A mappings: tool names, the messages schema, A2A parts."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import Message, Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf import json_format, struct_pb2
from langgraph.graph import START, MessagesState, StateGraph
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from app.assistants.service import system_assistant_id
from app.protocols.a2a import GraphkeepRequestHandler
from app.protocols.a2a_tasks import INTERNAL_MESSAGE, TASK_KEY, MessageInput, task_id_of
from app.protocols.mcp import simplify_messages_schema, tool_names
from app.protocols.shared import token_text


def _assistant(name: str, graph_id: str, assistant_id: str) -> dict[str, str]:
    return {"name": name, "graph_id": graph_id, "assistant_id": assistant_id}


def test_tool_names_are_mcp_safe_unique_and_graph_ids_name_system_assistants() -> None:
    custom = _assistant("agent", "agent", "11111111-2222-3333-4444-555555555555")
    system = _assistant("agent", "agent", system_assistant_id("agent"))
    spaced = _assistant("my agent/v2!", "agent", "99999999-2222-3333-4444-555555555555")
    names = tool_names([custom, system, spaced])
    assert names["agent"] is system  # listed after the custom one, still wins its graph id
    assert names["agent-11111111"] is custom
    assert names["my_agent_v2_"] is spaced
    assert all(len(n) <= 128 for n in tool_names([_assistant("x" * 300, "g", "a" * 36)]))


def test_messages_schema_becomes_a_string() -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("n", lambda s: s)
    builder.add_edge(START, "n")
    schema = builder.compile().get_input_jsonschema()
    simple = simplify_messages_schema(schema)
    assert simple["properties"]["messages"]["type"] == "string"
    assert "$defs" not in simple
    plain = {"type": "object", "properties": {"text": {"type": "string"}}}
    assert simplify_messages_schema(plain) == plain


def _data(value: object) -> Part:
    return Part(data=json_format.ParseDict(value, struct_pb2.Value()))


def test_message_parts_to_graph_input_and_resume_values() -> None:
    said = MessageInput(Message(message_id="m1", parts=[Part(text="hi"), _data({"k": 1})]))
    assert said.graph_input() == {
        "k": 1,
        "messages": [{"role": "human", "content": "hi", "id": "m1"}],
    }
    assert said.resume_value() == "hi"
    assert MessageInput(Message(parts=[_data({"resume": False})])).resume_value() is False
    assert MessageInput(Message(parts=[_data({"approved": True})])).resume_value() == {
        "approved": True
    }
    with pytest.raises(InvalidParamsError):
        MessageInput(Message(parts=[]))
    with pytest.raises(InvalidParamsError):
        MessageInput(Message(parts=[_data([1, 2])]))
    with pytest.raises(ContentTypeNotSupportedError):
        MessageInput(Message(parts=[Part(url="https://example.com/x.png")]))


def test_a_resumed_run_belongs_to_its_first_runs_task() -> None:
    first = {"run_id": "r1", "metadata": {"protocol": "graphkeep.protocols"}}
    resumed = {"run_id": "r2", "metadata": {TASK_KEY: "r1"}}
    assert task_id_of(first) == "r1"
    assert task_id_of(resumed) == "r1"
    assert task_id_of({"run_id": "r3", "metadata": None}) == "r3"


def test_token_text_streams_ai_chunks_once_and_skips_the_rest() -> None:
    seen: set[str] = set()
    chunk = [{"type": "AIMessageChunk", "id": "m1", "content": "Hel"}, {}]
    blocks = [{"type": "AIMessageChunk", "id": "m1", "content": [{"type": "text", "text": "lo"}]}]
    assert token_text(chunk, seen) == "Hel"
    assert token_text([*blocks, {}], seen) == "lo"
    # the whole message after its chunks is not new; a whole AI message never chunked is
    assert token_text([{"type": "ai", "id": "m1", "content": "Hello"}, {}], seen) == ""
    assert token_text([{"type": "ai", "id": "m2", "content": "Hi"}, {}], seen) == "Hi"
    assert token_text([{"type": "human", "id": "h", "content": "me"}, {}], seen) == ""
    assert token_text([{"type": "tool", "id": "t", "content": "42"}, {}], seen) == ""
    assert token_text(["not a message"], seen) == ""
    assert token_text([], seen) == ""


class _FailingHandler(GraphkeepRequestHandler):
    """The real handler whose run start fails unexpectedly, as when PostgreSQL refuses
    connections ("sorry, too many clients already")."""

    async def _start(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError("(asyncpg.Error) sorry, too many clients already: SELECT secret")


def test_a2a_unexpected_failure_is_a_protocol_internal_error_without_its_text() -> None:
    dispatcher = JsonRpcDispatcher(
        request_handler=_FailingHandler(),
        context_builder=DefaultServerCallContextBuilder(),
        enable_v0_3_compat=True,
    )
    app = Starlette(routes=[Route("/", dispatcher.handle_requests, methods=["POST"])])
    message = {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": message}}
    with TestClient(app) as client:
        answer = client.post("/", json=body).json()
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32603
    assert answer["error"]["message"] == INTERNAL_MESSAGE
    assert "secret" not in str(answer) and "asyncpg" not in str(answer)

"""LangGraph v3 protocol events -> thread-log events (app/runs/protocol_events.py)."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.types import Interrupt

from app.runs.protocol_events import ProtocolNormaliser


def _ev(method: str, data: object, ns: list[str] | None = None, **params: object) -> dict:
    return {
        "type": "event",
        "method": method,
        "params": {"namespace": ns or [], "data": data, **params},
    }


def test_interrupts_become_input_requested_then_one_root_interrupted() -> None:
    n = ProtocolNormaliser("g")
    first = Interrupt(value={"q": 1}, id="a" * 32)
    out = n.convert(_ev("values", {"x": 1, "__interrupt__": [first]}, interrupts=(first,)))
    assert out == [
        ("input.requested", [], {"interrupt_id": "a" * 32, "payload": {"q": 1}, "value": {"q": 1}}),
        ("lifecycle", [], {"event": "interrupted", "graph_name": "g"}),
        ("values", [], {"x": 1}),
    ]
    # announced once; a second interrupt gets its own event but no second root `interrupted`
    second = Interrupt(value=2, id="b" * 32)
    again = n.convert(_ev("values", {"x": 1}, interrupts=(first, second)))
    assert [m for m, _, _ in again] == ["input.requested", "values"]
    assert n.root_interrupted


def test_lifecycle_moves_to_the_child_namespace_and_root_is_the_drivers() -> None:
    n = ProtocolNormaliser("g")
    started = {"event": "started", "namespace": ["tools:1"], "graph_name": "researcher"}
    assert n.convert(_ev("lifecycle", started)) == [("lifecycle", ["tools:1"], started)]
    assert n.convert(_ev("lifecycle", {"event": "running"})) == []


def test_messages_keep_content_block_events_and_drop_whole_messages() -> None:
    n = ProtocolNormaliser("g")
    start = ({"event": "message-start", "role": "ai", "id": "m"}, {"langgraph_node": "think"})
    assert n.convert(_ev("messages", start)) == [
        (
            "messages",
            [],
            {
                "event": "message-start",
                "role": "ai",
                "id": "m",
                "metadata": {"langgraph_node": "think"},
            },
        )
    ]
    assert n.convert(_ev("messages", (AIMessage(content="whole"), {}))) == []
    assert n.convert(_ev("tasks", {"id": "t"})) == []
    assert n.convert(_ev("updates", {"node": {"a": 1}, "__interrupt__": []})) == [
        ("updates", [], {"node": {"a": 1}})
    ]

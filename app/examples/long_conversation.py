"""Long conversation whose message list lives on a DeltaChannel.

A DeltaChannel checkpoints only the new messages of each step (plus a periodic snapshot), so a
thread with thousands of turns does not rewrite its whole history on every checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langgraph.channels import DeltaChannel
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from app.examples.fake_model import last_human_text


def append_messages(state: list[BaseMessage] | None, writes: Sequence[Any]) -> list[BaseMessage]:
    """Append every written message; associative, as DeltaChannel requires."""
    result: list[BaseMessage] = list(state or [])
    for write in writes:
        batch = write if isinstance(write, list) else [write]
        result.extend(convert_to_messages(batch))
    return result


class ConversationState(TypedDict):
    messages: Annotated[list[BaseMessage], DeltaChannel(append_messages, snapshot_frequency=50)]


def reply(state: ConversationState) -> dict[str, Any]:
    turn = sum(1 for m in state["messages"] if m.type == "human")
    return {"messages": [AIMessage(content=f"turn {turn}: {last_human_text(state['messages'])}")]}


builder = StateGraph(ConversationState)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
graph = builder.compile()

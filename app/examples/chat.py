"""Chat agent: answers every human message with a deterministic, token-streamed reply."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from app.examples.fake_model import echo_model, last_human_text


async def respond(state: MessagesState, config: RunnableConfig) -> dict[str, list[AIMessage]]:
    """Reply through a chat model so `messages` stream mode yields token chunks."""
    text = last_human_text(state["messages"])
    reply = f"You said: {text}" if text else "Hello! Say something."
    message = await echo_model(reply).ainvoke(state["messages"], config)
    return {"messages": [AIMessage(content=message.text, id=message.id)]}


builder = StateGraph(MessagesState)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
graph = builder.compile()

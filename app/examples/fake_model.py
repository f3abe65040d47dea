"""A deterministic chat model that streams its reply token by token (no network)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage


def last_human_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the newest human message, or "" when there is none."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


def echo_model(reply: str) -> GenericFakeChatModel:
    """A fresh fake model that answers `reply`; it streams one chunk per word and space.

    A new model per call keeps replies deterministic: GenericFakeChatModel consumes an
    iterator, so a shared instance would answer differently on every run.
    """
    return GenericFakeChatModel(messages=iter([AIMessage(content=reply)]))

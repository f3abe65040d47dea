"""Request bodies shared by several methods (the run options above all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from ._models import Checkpoint, Command, Durability, IfNotExists, MultitaskStrategy


class RunOptions(TypedDict, total=False):
    """Keyword options of `runs.create`, `runs.stream` and `runs.wait` (see the server's
    run create payload). Leave one out to get the server default."""

    input: Any
    command: Command | Mapping[str, Any]
    metadata: Mapping[str, Any]
    config: Mapping[str, Any]
    context: Mapping[str, Any]
    checkpoint: Checkpoint | Mapping[str, Any]
    checkpoint_id: str
    interrupt_before: Literal["*"] | Sequence[str]
    interrupt_after: Literal["*"] | Sequence[str]
    multitask_strategy: MultitaskStrategy
    if_not_exists: IfNotExists
    after_seconds: float
    durability: Durability
    webhook: str
    on_completion: Literal["delete", "keep"]
    on_disconnect: Literal["cancel", "continue"]
    stream_mode: str | Sequence[str]
    stream_subgraphs: bool
    stream_resumable: bool


_RUN_KEYS = frozenset(RunOptions.__annotations__)


def run_body(assistant_id: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of a run create; rejects misspelt options before anything is sent."""
    unknown = sorted(set(options) - _RUN_KEYS)
    if unknown:
        raise TypeError(f"unknown run option(s): {', '.join(unknown)}")
    body: dict[str, Any] = {"assistant_id": assistant_id}
    for key, value in options.items():
        if value is None:
            continue
        if key == "command":
            value = value.to_json() if isinstance(value, Command) else _drop_none(value)
        elif key == "checkpoint" and isinstance(value, Checkpoint):
            value = value.to_json()
        elif key in ("interrupt_before", "interrupt_after") and not isinstance(value, str):
            value = list(value)
        elif key == "stream_mode" and not isinstance(value, str):
            value = list(value)
        body[key] = value
    return body


def checkpoint_json(checkpoint: Checkpoint | Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint reference in wire form."""
    if isinstance(checkpoint, Checkpoint):
        return checkpoint.to_json()
    return _drop_none(checkpoint)


def _drop_none(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}

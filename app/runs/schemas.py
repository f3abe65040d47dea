"""Run request models (contract section 5.2); the Run itself is app/runs/models.py."""

from __future__ import annotations

import os
import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.db.storable import (
    MAX_AFTER_SECONDS,
    MAX_URL_CHARS,
    WEBHOOK_URL_PATTERN,
    IdList,
    JSONBool,
    JSONFloat,
    Metadata,
    check_webhook_url,
)

MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
RUN_SELECT_FIELDS = frozenset(
    {
        "run_id",
        "thread_id",
        "assistant_id",
        "created_at",
        "updated_at",
        "status",
        "metadata",
        "kwargs",
        "multitask_strategy",
        "cancel_reason",
        "langsmith_session_name",
    }
)


def new_run_id() -> str:
    """A UUIDv7 (time-ordered), as the official server generates for runs and threads."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76 | ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


class CheckpointRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    checkpoint_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_map: dict[str, Any] | None = None


class RunCreate(BaseModel):
    """The run create payload, shared by every run-creating endpoint (unknown keys ignored)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str = Field(min_length=1)
    input: Any = None
    command: dict[str, Any] | None = None
    metadata: Metadata = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: JSONBool | None = None
    stream_resumable: JSONBool | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    multitask_strategy: MultitaskStrategy | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: JSONFloat | None = Field(
        default=None, ge=0, le=MAX_AFTER_SECONDS, allow_inf_nan=False
    )
    durability: Literal["sync", "async", "exit"] | None = None
    checkpoint_during: JSONBool | None = None
    webhook: Annotated[str | None, AfterValidator(check_webhook_url)] = Field(
        None,
        max_length=MAX_URL_CHARS,
        pattern=WEBHOOK_URL_PATTERN,
        json_schema_extra={"format": "uri"},
        description="An absolute http(s) URL with a host.",
    )
    feedback_keys: list[str] | None = None
    langsmith_tracer: Any = None
    strict_resume: JSONBool | None = None


class RunsCancel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = None
    run_ids: IdList = None
    status: Literal["pending", "running", "all"] | None = None

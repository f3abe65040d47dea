"""Cron request models and the Cron object as the API returns it (names of langgraph_sdk)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import Row

from app.db.storable import JSONBool, JSONInt
from app.runs.schemas import MultitaskStrategy

JSONObject = dict[str, Any]
OnRunCompleted = Literal["delete", "keep"]


class CronStatus:
    """`crons.status`: why a cron fires or no longer does."""

    ACTIVE = "active"
    ENDED = "ended"  # past end_time: nothing more to fire
    ASSISTANT_DELETED = "assistant_deleted"
    THREAD_DELETED = "thread_deleted"


CRON_FIELDS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
)
CRON_SORT_COLUMNS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "next_run_date",
    "end_time",
    "created_at",
    "updated_at",
)
# The run fields a cron keeps in `payload` and each firing creates its run with.
PAYLOAD_FIELDS = (
    "input",
    "config",
    "context",
    "checkpoint_during",
    "interrupt_before",
    "interrupt_after",
    "webhook",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
    "multitask_strategy",
)


class _Request(BaseModel):
    # Unknown fields are ignored (newer SDKs); `user_id` among them: a cron runs as its
    # creator, never as a client-supplied identity.
    model_config = ConfigDict(extra="ignore")


class _RunFields(_Request):
    input: Any = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: JSONObject | None = None
    checkpoint_during: JSONBool | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    webhook: str | None = Field(default=None, max_length=2048)
    stream_mode: str | list[str] | None = None
    stream_subgraphs: JSONBool | None = None
    stream_resumable: JSONBool | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    multitask_strategy: MultitaskStrategy | None = None
    on_run_completed: OnRunCompleted | None = None
    schedule: str | None = Field(default=None, max_length=255)
    timezone: str | None = Field(default=None, max_length=64)
    end_time: datetime | None = None
    enabled: JSONBool | None = None


class CronCreate(_RunFields):
    assistant_id: str = Field(min_length=1, max_length=255)
    schedule: str = Field(min_length=1, max_length=255)


class CronUpdate(_RunFields):
    """Every field optional; `end_time: null` clears it (an absent key leaves it)."""


class CronSearch(_Request):
    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: JSONBool | None = None
    metadata: JSONObject | None = None
    limit: JSONInt = Field(10, ge=1, le=1000)
    offset: JSONInt = Field(0, ge=0, le=2**31 - 1)
    sort_by: str | None = None
    sort_order: str | None = None
    select: list[str] | None = None


class CronCount(_Request):
    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: JSONObject | None = None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def cron_json(row: Row[Any], select: list[str] | None = None) -> JSONObject:
    """A crons row as the contract's Cron object (only `select`ed keys when given)."""
    out: JSONObject = {
        "cron_id": row.cron_id,
        "assistant_id": row.assistant_id,
        "thread_id": row.thread_id,
        "on_run_completed": row.on_run_completed,
        "end_time": _iso(row.end_time),
        "schedule": row.schedule,
        "timezone": row.timezone,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "user_id": row.user_id,
        "payload": row.payload,
        "next_run_date": _iso(row.next_run_date),
        "metadata": row.metadata,
        "enabled": row.enabled,
        "status": row.status,
    }
    if select:
        return {name: out[name] for name in select}
    return out

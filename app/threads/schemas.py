"""Thread, ThreadState and request models (names follow langgraph_sdk.schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.db.storable import (
    MAX_LIMIT,
    Filter,
    IdList,
    JSONBool,
    JSONFloat,
    JSONInt,
    Metadata,
    Offset,
)
from app.graphs.jsonable import IsoDateTime

JSONObject = dict[str, Any]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]

THREAD_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "status",
    "values",
    "interrupts",
)
THREAD_SORT_COLUMNS = ("thread_id", "status", "created_at", "updated_at", "state_updated_at")


class _Request(BaseModel):
    # Unknown fields are ignored: newer SDKs send fields this version does not know.
    model_config = ConfigDict(extra="ignore")


# Upper bound for TTLs in minutes (about 100 years): larger values overflow datetime.
MAX_TTL_MINUTES = 60 * 24 * 365 * 100


class ThreadTTL(_Request):
    ttl: JSONFloat = Field(
        gt=0, le=MAX_TTL_MINUTES, description="Minutes until the thread expires."
    )
    strategy: Literal["delete", "keep_latest"] = "delete"


class Thread(BaseModel):
    thread_id: str
    created_at: IsoDateTime
    updated_at: IsoDateTime
    state_updated_at: IsoDateTime
    metadata: JSONObject
    config: JSONObject
    status: ThreadStatus
    values: Any = None
    interrupts: JSONObject
    error: Any = None
    ttl: JSONObject | None = None


class SuperstepUpdate(_Request):
    values: Any = None
    command: JSONObject | None = None
    as_node: str


class Superstep(_Request):
    updates: list[SuperstepUpdate] = Field(min_length=1)


class ThreadCreate(_Request):
    thread_id: str | None = None
    metadata: Metadata = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    ttl: ThreadTTL | None = None
    supersteps: list[Superstep] | None = Field(
        None, description="State updates applied in order at creation (needs metadata.graph_id)."
    )


class ThreadPatch(_Request):
    metadata: Metadata = None
    ttl: ThreadTTL | None = None


class ThreadCount(_Request):
    metadata: Filter = None
    values: Filter = None
    status: ThreadStatus | None = None


class ThreadSearch(ThreadCount):
    ids: IdList = None
    limit: JSONInt = Field(10, ge=1, le=MAX_LIMIT)
    offset: Offset = 0
    sort_by: str | None = None
    sort_order: str | None = None
    select: list[str] | None = None
    extract: dict[str, str] | None = Field(
        None,
        description="Aliases to paths (`values.messages[-1].content`) returned in `extracted`.",
    )


class ThreadPrune(_Request):
    thread_ids: list[str]
    strategy: Literal["delete", "keep_latest"] = "delete"


class PruneResult(BaseModel):
    pruned_count: int


class CheckpointRef(_Request):
    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    checkpoint_map: JSONObject | None = None


class StateCheckpointRequest(_Request):
    checkpoint: CheckpointRef
    subgraphs: JSONBool = False
    select: list[str] | None = Field(
        None, description="Fields to return; `values.<key>` returns one state key."
    )


class StateUpdate(_Request):
    values: Any = None
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None


class StateUpdateResult(BaseModel):
    checkpoint: JSONObject
    configurable: JSONObject
    checkpoint_id: str


class HistoryRequest(_Request):
    limit: JSONInt = Field(10, ge=1, le=1000)
    before: str | JSONObject | None = None
    metadata: JSONObject | None = None
    checkpoint: CheckpointRef | None = None
    select: list[str] | None = Field(
        None, description="Fields to return; `values.<key>` returns one state key."
    )


class ThreadState(BaseModel):
    values: Any
    next: list[str]
    tasks: list[JSONObject]
    checkpoint: JSONObject | None
    parent_checkpoint: JSONObject | None
    metadata: JSONObject | None
    created_at: str | None
    interrupts: list[JSONObject]
    checkpoint_id: str | None = None
    parent_checkpoint_id: str | None = None

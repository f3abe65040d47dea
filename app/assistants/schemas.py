"""Assistant request and response models (names follow langgraph_sdk.schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.db.storable import MAX_LIMIT, MAX_VERSION, Filter, JSONInt, Metadata, Offset
from app.graphs.jsonable import IsoDateTime

JSONObject = dict[str, Any]

ASSISTANT_FIELDS = (
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
)
ASSISTANT_SORT_COLUMNS = ("assistant_id", "graph_id", "name", "created_at", "updated_at")


class _Request(BaseModel):
    # Unknown fields are ignored: newer SDKs send fields this version does not know.
    model_config = ConfigDict(extra="ignore")


class Assistant(BaseModel):
    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: JSONObject
    context: JSONObject
    metadata: JSONObject
    version: int
    created_at: IsoDateTime
    updated_at: IsoDateTime


class AssistantVersion(BaseModel):
    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: JSONObject
    context: JSONObject
    metadata: JSONObject
    version: int
    created_at: IsoDateTime


class AssistantCreate(_Request):
    graph_id: str
    assistant_id: str | None = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: Metadata = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: str | None = None
    description: str | None = None


class AssistantPatch(_Request):
    graph_id: str | None = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: Metadata = None
    name: str | None = None
    description: str | None = None


class AssistantCount(_Request):
    metadata: Filter = None
    graph_id: str | None = None
    name: str | None = None


class AssistantSearch(AssistantCount):
    limit: JSONInt = Field(10, ge=1, le=MAX_LIMIT)
    offset: Offset = 0
    sort_by: str | None = None
    sort_order: str | None = None
    select: list[str] | None = None


class AssistantVersionsSearch(_Request):
    metadata: Filter = None
    limit: JSONInt = Field(10, ge=1, le=MAX_LIMIT)
    offset: Offset = 0


class AssistantSetLatest(_Request):
    # below 1 stays a 404 (no such version), as every in-range number the table lacks
    version: JSONInt = Field(ge=-MAX_VERSION, le=MAX_VERSION)


class GraphSchemas(BaseModel):
    graph_id: str
    input_schema: JSONObject | None = None
    output_schema: JSONObject | None = None
    state_schema: JSONObject | None = None
    config_schema: JSONObject | None = None
    context_schema: JSONObject | None = None

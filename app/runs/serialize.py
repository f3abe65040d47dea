"""JSON encoding of graph output (stream chunks, state values) for events and the API.

One encoder for everything a graph may emit: LangChain messages and other pydantic models,
dataclasses (Interrupt, Send), sets, datetimes, UUIDs, bytes. Events are stored as the exact
compact JSON text that goes on the wire, so encoding happens once per chunk.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import orjson
from langgraph.types import Command, Interrupt, Send

# Dataclasses go through `_default` so Interrupt gets the contract's shape.
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATACLASS


def _default(obj: Any) -> Any:
    if isinstance(obj, Interrupt):
        # {id, value}, plus response_schema only when the graph set one (RemoteGraph rebuilds
        # Interrupt(**obj), so no other keys).
        out = {"value": obj.value, "id": obj.id}
        schema = getattr(obj, "response_schema", None)
        if schema is not None:
            out["response_schema"] = schema
        return out
    if isinstance(obj, Send):
        return {"node": obj.node, "arg": obj.arg}
    if isinstance(obj, Command):
        return {
            k: v
            for k, v in (
                ("graph", obj.graph),
                ("update", obj.update),
                ("resume", obj.resume),
                ("goto", obj.goto),
            )
            if v not in (None, ())
        }
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):  # pydantic v2 models, LangChain messages
        return model_dump()
    as_dict = getattr(obj, "dict", None)
    if callable(as_dict) and hasattr(obj, "__fields__"):  # pydantic v1 models
        return as_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, datetime | date | time):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, Decimal):
        return float(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, bytes | bytearray):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    # Anything else (callables, handles): its repr, never a failure that kills the stream.
    return repr(obj)


def dumps(obj: Any) -> str:
    """Compact JSON text of `obj`."""
    return orjson.dumps(obj, default=_default, option=_OPTIONS).decode()


def to_jsonable(obj: Any) -> Any:
    """`obj` as plain JSON types (dicts, lists, str, numbers), for JSON columns."""
    return orjson.loads(orjson.dumps(obj, default=_default, option=_OPTIONS))


def error_payload(exc: BaseException) -> dict[str, str]:
    """The contract's error shape: {"error": "<ExceptionType>", "message": str}."""
    return {"error": type(exc).__name__, "message": str(exc)}

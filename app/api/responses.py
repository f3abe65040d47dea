"""Ready JSON responses for the hot read paths.

An endpoint that returns a model or a dict makes FastAPI validate it against the route's
`response_model` and serialize it again (for a thread state, a second walk over the whole
state). The hot routes return one of these instead: bytes from the one JSON encoder
(app.graphs.jsonable) or from the model's own serializer, written once. The routes keep
`response_model`, so the OpenAPI document is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Response
from pydantic import BaseModel

from app.graphs.jsonable import dump_bytes

JSON = "application/json"


def json_response(
    content: Any, *, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """`content` (JSON types, graph values, LangChain messages...) as a JSON response."""
    return Response(dump_bytes(content), status_code=status_code, headers=headers, media_type=JSON)


def model_response(
    model: BaseModel, *, exclude: set[str] | None = None, status_code: int = 200
) -> Response:
    """A pydantic model serialized by its own (Rust) serializer, exactly as FastAPI would."""
    return Response(
        model.model_dump_json(exclude=exclude), status_code=status_code, media_type=JSON
    )

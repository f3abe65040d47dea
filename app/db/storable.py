"""What both databases can store and read back: the one check for text and numbers.

PostgreSQL's `text` and `jsonb` refuse NUL characters and lone UTF-16 surrogates (neither is
valid UTF-8); SQLite stores them but its JSON functions (and our readers) then fail on that
row for good. Integers beyond 64 bits overflow both databases' integer types and NaN or
Infinity are not JSON. Every client value is checked with these functions at the boundary
(app/api/boundary.py, with `body_problem` for a body) and graph output before it is
persisted, so no statement ever sees such a value and no row becomes unreadable.

Errors name where the bad value is (a JSON path), never the value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, Strict

from app.errors import ValidationFailed

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Far deeper than any real payload, and well below orjson's limit of 254 levels when a value
# is written back inside a response (a deeper one could be stored but never read).
MAX_JSON_DEPTH = 100

_NUL_OR_SURROGATE = re.compile(r"[\x00\ud800-\udfff]")


# NaN, Infinity and 1e999 are not JSON at all: a body holding one is malformed (400)
NOT_FINITE = "number is not finite (NaN, Infinity or overflow): not JSON"
TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"


class UnstorableValue(ValidationFailed):
    """A value neither database can store and read back (answered 422; fails a run)."""


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored ('a NUL character', 'a lone surrogate'), or None."""
    if value.isascii():
        return "a NUL character" if "\x00" in value else None
    if _NUL_OR_SURROGATE.search(value) is None:
        return None
    # JSON decoding joins an escaped surrogate pair into one code point, so a surrogate code
    # point left in a string is a lone one (and not UTF-8 in any case)
    return "a NUL character" if "\x00" in value else "a lone surrogate"


def _where(path: list[str | int], root: str) -> str:
    text = root
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def json_problem(text: str | bytes, root: str) -> tuple[Any, str | None]:
    """`text` decoded as JSON and the first reason it cannot be stored (`value_problem`);
    raises ValueError when it is not JSON. Text nested too deep for the parser to decode
    (RecursionError) is a problem, not an error: it is deeper than MAX_JSON_DEPTH in any case."""
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"{root}: {TOO_DEEP}"
    return value, value_problem(value, root)


# What can make a decoded body unstorable: an escape (NUL, surrogates), a non-finite constant,
# a 19-digit integer, or a 3-digit positive exponent (1e309 overflows to infinity; smaller or
# negative ones are finite). A false positive (a hex id with "8e123") costs one parse.
_SUSPECT = re.compile(rb"\\u|Infinity|NaN|\d{19}|\d[eE]\+?\d{3}")
NOT_UTF8 = "request body is not valid UTF-8 (raw surrogate or invalid bytes)"


def _plainly_storable(raw: bytes) -> bool:
    """Whether the bytes alone show nothing could be unstorable once decoded."""
    return (
        _SUSPECT.search(raw) is None
        and raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH  # cannot nest too deep
    )


def body_problem(raw: bytes) -> tuple[int, str] | None:
    """(status, detail) when a JSON body cannot be stored, or None (malformed JSON is left to
    its reader, which answers it its own way). The common body (ASCII, no `\\u` escape, no
    number that could overflow, few brackets) is recognised from its bytes without being
    decoded; only the others are parsed and walked."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return 400, NOT_UTF8
    if _plainly_storable(raw):
        return None
    try:
        _, problem = json_problem(raw, "body")
    except ValueError:
        return None
    if problem is None:
        return None
    return (400 if NOT_FINITE in problem else 422), problem


def value_problem(value: Any, root: str = "body") -> str | None:
    """The first reason `value` (decoded JSON) cannot be stored, naming its path; or None."""
    # iterative walk: a hostile body nested deeply must not exhaust the stack
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_JSON_DEPTH:
            return f"{_where(path[:3], root)}...: {TOO_DEEP}"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"{_where(path, root)}: text contains {problem}"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return f"{_where(path, root)}: integer outside the 64-bit range"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_where(path, root)}: {NOT_FINITE}"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str):
                    problem = text_problem(key)
                    if problem:
                        return f"{_where(path, root)}: a key contains {problem}"
                    stack.append((child, [*path, _safe_key(key)]))
                else:
                    stack.append((child, [*path, str(key)]))
        elif isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, [*path, index]))
    return None


def _safe_key(key: str) -> str:
    # keys end up in error messages: only their harmless beginning
    return key if len(key) <= 40 and key.isprintable() else "<key>"


def check_storable(value: Any, root: str = "body") -> None:
    """Raise UnstorableValue (422) when `value` cannot be stored and read back."""
    problem = value_problem(value, root)
    if problem is not None:
        raise UnstorableValue(problem)


# --- Bounds on the numbers and sizes a client controls (documented in openapi.json) ---

# Offsets bind as 32-bit integers on PostgreSQL (offset + limit must fit too).
MAX_OFFSET = 1_000_000_000
MAX_LIMIT = 1000
MAX_IDS = 1000  # ids in one search: far below PostgreSQL's 32,767 bind parameters
MAX_AFTER_SECONDS = 365 * 24 * 3600  # a delayed run starts within a year
MAX_FILTER_CONDITIONS = 64  # leaf values of one metadata / values / Store filter
MAX_METADATA_BYTES = 64 * 1024  # one metadata object, as JSON
# Store: the primary key (tenant, namespace joined by ".", key) must fit a btree index row.
MAX_NAMESPACE_DEPTH = 32
MAX_NAMESPACE_BYTES = 1024  # labels joined by "." as UTF-8
MAX_KEY_BYTES = 1024
MAX_ID_CHARS = 255  # thread / checkpoint / namespace ids: the String(255) columns
# an assistant version binds as a 32-bit INTEGER on PostgreSQL (out of range: a DataError)
MAX_VERSION = 2**31 - 1


def _leaves(value: Any) -> int:
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
            count += 0 if item else 1
        elif isinstance(item, list | tuple):
            stack.extend(item)
            count += 0 if item else 1
        else:
            count += 1
    return count


def check_filter(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A filter has at most MAX_FILTER_CONDITIONS leaf values (each becomes a condition)."""
    if value is not None and _leaves(value) > MAX_FILTER_CONDITIONS:
        raise ValueError(f"at most {MAX_FILTER_CONDITIONS} filter conditions")
    return value


def check_metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata is at most MAX_METADATA_BYTES as JSON."""
    if value is not None:
        try:
            size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))
        except (TypeError, ValueError):
            return value  # the storable check answers what cannot be encoded
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES}")
    return value


def _json_number(value: Any) -> Any:
    """A JSON Schema `integer` is a number, never `true` or `"10"`. pydantic's lax mode would
    take those as 1 and 10; an integral float (`3.0`, an integer to JSON Schema) still is."""
    if isinstance(value, bool | str | bytes):
        raise ValueError("must be a JSON number, not a boolean or a string")
    return value


# Request body fields as JSON Schema types them: the boundary refuses a value the schema
# refuses (a boolean or a string for a number, 0 or "true" for a boolean) instead of
# converting it. Query parameters arrive as text and keep FastAPI's conversion.
# `JSONNumber` goes after a field's own bounds (`Annotated[int, Field(ge=...), JSONNumber]`):
# bounds placed after a validator are no longer written into the JSON schema as
# minimum/maximum. `JSONInt` is for a field whose bounds come from `= Field(...)`.
JSONNumber = BeforeValidator(_json_number)
JSONInt = Annotated[int, JSONNumber]
JSONFloat = Annotated[float, Strict()]  # an int is a number too
JSONBool = Annotated[bool, Strict()]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET), JSONNumber]
Filter = Annotated[
    dict[str, Any] | None,
    AfterValidator(check_filter),
    Field(description=f"At most {MAX_FILTER_CONDITIONS} conditions."),
]
Metadata = Annotated[
    dict[str, Any] | None,
    AfterValidator(check_metadata),
    Field(description=f"At most {MAX_METADATA_BYTES} bytes as JSON."),
]
IdList = Annotated[list[str] | None, Field(max_length=MAX_IDS)]


MAX_URL_CHARS = 2048
# what the spec states (check_webhook_url checks the rest: a valid port, no control chars)
WEBHOOK_URL_PATTERN = r"^https?://[^/?#\s@]*@?[^/?#\s@:]+"


def check_webhook_url(value: str | None) -> str | None:
    """An absolute http(s) URL with a host, no whitespace or control characters."""
    if value is None:
        return None
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise ValueError("webhook: must not contain whitespace or control characters")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises for a port that is not a number in range
    except ValueError:
        raise ValueError("webhook: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("webhook: must be an absolute http:// or https:// URL with a host")
    del port
    return value

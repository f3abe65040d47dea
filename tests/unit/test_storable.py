"""The one boundary check and its byte pre-check (app/db/storable.py), and the URL check of
app/api/boundary.py."""

from __future__ import annotations

import json

import pytest

from app.api.boundary import url_problem
from app.db.storable import (
    MAX_JSON_DEPTH,
    NOT_FINITE,
    UnstorableValue,
    body_problem,
    check_filter,
    check_metadata,
    check_storable,
    check_webhook_url,
    json_problem,
    text_problem,
    value_problem,
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("plain", None),
        ("é \U0001f600 \u2028", None),
        ("a\x00b", "a NUL character"),
        ("a\ud800b", "a lone surrogate"),
        ("\udfff", "a lone surrogate"),
    ],
)
def test_text_problem(text: str, problem: str | None) -> None:
    assert text_problem(text) == problem


def test_value_problem_names_the_path_never_the_value() -> None:
    problem = value_problem({"a": [1, {"SECRET\x00": 1}]})
    assert problem == "body.a[1]: a key contains a NUL character"
    assert value_problem({"a": {"b": "x\ud800"}}) == "body.a.b: text contains a lone surrogate"
    assert "integer outside" in str(value_problem({"n": 2**63}))
    assert value_problem({"n": 2**63 - 1, "m": -(2**63)}) is None
    assert "not finite" in str(value_problem([float("inf")]))
    with pytest.raises(UnstorableValue):
        check_storable({"x": "\x00"})


def test_depth_is_bounded_without_recursion() -> None:
    deep: object = []
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    assert "nested deeper" in str(value_problem(deep))
    very: object = []
    for _ in range(100_000):  # iterative walk: no RecursionError
        very = [very]
    assert value_problem(very) is not None


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b'{"a": "x"}', None),
        (b'{"a": "\\\\u0000"}', None),  # an escaped backslash, then the text "u0000"
        (b'{"a": "\\ud83d\\ude00"}', None),  # an escaped pair: one code point
        (b'{"a": "\\u0000"}', 422),
        (b'{"a": "\\ud800"}', 422),
        (b'{"\\udc00": 1}', 422),
        (b'{"a": "\xed\xa0\x80"}', 400),  # raw CESU-8
        (b'{"a": "\xe9"}', 400),  # latin-1
        (b'{"a": NaN}', 400),
        (b'{"a": -Infinity}', 400),
        (b'{"a": 1e999}', 400),
        (b'{"a": 1e308, "b": 1e-999}', None),
        (b'{"a": 99999999999999999999}', 422),
        (b"{not json", None),  # left to the route's own 422
        ("é".encode() + b'"', None),
    ],
)
def test_body_problem(raw: bytes, status: int | None) -> None:
    found = body_problem(raw)
    assert (found[0] if found else None) == status, found


def test_deep_body_is_parsed_even_without_suspect_bytes() -> None:
    raw = json.dumps({"x": json.loads("[" * 150 + "]" * 150)}).encode()
    assert body_problem(raw) == (422, "body.x" + "[0]" * 2 + "...: nested deeper than 100 levels")


def test_body_too_deep_for_the_parser_is_refused_not_left_to_the_route() -> None:
    # json.loads raises RecursionError near 1,000 levels; FastAPI answered some routes 400
    # for it and others (the thread commands) 500, the A2A SDK an internal JSON-RPC error
    raw = b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert body_problem(raw) == (422, "body: nested deeper than 100 levels")
    assert json_problem(raw, "frame") == (None, "frame: nested deeper than 100 levels")
    assert json_problem(b'{"a": [1]}', "frame") == ({"a": [1]}, None)
    assert json_problem(b'{"a": NaN}', "frame")[1] == f"frame.a: {NOT_FINITE}"
    with pytest.raises(ValueError):
        json_problem(b"{not json", "frame")


def test_url_problem() -> None:
    assert url_problem({"path": "/threads/a\x00b", "query_string": b""}) is not None
    assert url_problem({"path": "/threads", "query_string": b"status=%00"}) is not None
    assert url_problem({"path": "/threads", "query_string": b"status=%E9"}) is None


@pytest.mark.parametrize(
    "url", ["::::", "ftp://h/", "http://", "http:///x", "http://h:99999/", "http://h/\n", "h"]
)
def test_bad_webhook_urls(url: str) -> None:
    with pytest.raises(ValueError):
        check_webhook_url(url)


def test_good_webhook_urls_and_sizes() -> None:
    assert check_webhook_url("https://u:p@hooks.example:8443/x?y=1") is not None
    assert check_webhook_url("http://[::1]:8080/") is not None
    assert check_filter({f"k{i}": i for i in range(64)}) is not None
    with pytest.raises(ValueError):
        check_filter({f"k{i}": i for i in range(65)})
    with pytest.raises(ValueError):
        check_metadata({"blob": "x" * 70_000})

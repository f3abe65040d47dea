"""openapi/openapi.json must match the live app's spec.

Adding or changing a route? Regenerate the file with `graphkeep openapi` (or
`python -m app.cli openapi`), which writes openapi/openapi.json with sorted keys, and commit
it with the route change. Give every new route an explicit `operation_id=`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from fastapi.routing import APIRoute

from app.cli import main as cli_main
from app.config import Settings
from app.main import create_app

SPEC_FILE = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
EXPLICIT_ID_MODULES = ("app.api.assistants", "app.api.threads", "app.api.store", "app.api.meta")


def live_spec_text() -> str:
    spec = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:")).openapi()
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def test_committed_spec_matches_the_app() -> None:
    assert SPEC_FILE.exists(), "run `graphkeep openapi` to write openapi/openapi.json"
    assert SPEC_FILE.read_text() == live_spec_text(), (
        "openapi/openapi.json is stale: run `graphkeep openapi` and commit the file"
    )


def test_operation_ids_are_unique_and_explicit() -> None:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    spec = app.openapi()
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    for route in app.routes:
        if isinstance(route, APIRoute) and route.endpoint.__module__ in EXPLICIT_ID_MODULES:
            assert route.operation_id, f"{route.path} needs an explicit operation_id"


def test_cli_writes_the_same_text(tmp_path: Path) -> None:
    out = tmp_path / "spec.json"
    assert cli_main(["openapi", "--output", str(out)]) == 0
    assert out.read_text() == live_spec_text()
    assert list(json.loads(out.read_text())) == sorted(json.loads(out.read_text()))

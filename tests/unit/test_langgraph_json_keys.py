"""Every key of the official langgraph.json schema has a documented fate (issue 20).

tests/data/langgraph_json_keys.json is the key list of langgraph-cli 0.4.40's schema
(langgraph_cli/schemas.py: `Config` and the TypedDicts it nests, as dotted paths). Each must
be in app/graphs/config_keys.py (honoured, refused or ignored), and the README table must be
the one generated from it: `python -m tests.unit.test_langgraph_json_keys --write` rewrites it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from app.checkpoint.serde import make_serde
from app.graphs.config import GraphConfigError, parse_config
from app.graphs.config_keys import ALL_KEYS, EXTRA_KEYS, KEYS, render_table

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OFFICIAL = json.loads((ROOT / "tests" / "data" / "langgraph_json_keys.json").read_text())
START = "<!-- langgraph-keys:start (generated: tests/unit/test_langgraph_json_keys.py) -->"
END = "<!-- langgraph-keys:end -->"


def _readme_table(text: str) -> str:
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def test_the_key_list_names_its_source() -> None:
    assert "langgraph-cli 0.4.40" in OFFICIAL["source"]
    assert len(OFFICIAL["keys"]) > 80 and "http.app" in OFFICIAL["keys"]


def test_every_official_key_is_classified_and_nothing_else() -> None:
    official = set(OFFICIAL["keys"])
    assert sorted(official - set(KEYS)) == [], "official keys graphkeep does not classify"
    assert sorted(set(KEYS) - official) == [], "classified keys not in the official schema"
    assert not set(EXTRA_KEYS) & official


def test_refused_and_ignored_keys_say_why() -> None:
    for key, (status, note) in ALL_KEYS.items():
        assert status in ("honoured", "refused", "ignored")
        if status != "honoured":
            assert note.strip(), key


def test_readme_table_matches() -> None:
    table = _readme_table(README.read_text())
    assert table == render_table(), (
        "README's langgraph.json key table is stale: run "
        "`python -m tests.unit.test_langgraph_json_keys --write`"
    )
    for key in OFFICIAL["keys"]:
        assert f"| `{key}` |" in table


def _nested(dotted: str, value: Any) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    return {head: _nested(rest, value) if rest else value}


@pytest.mark.parametrize("key", [k for k, (s, _) in KEYS.items() if s == "refused"])
def test_every_refused_key_stops_start_up_naming_it(key: str) -> None:
    with pytest.raises(GraphConfigError) as info:
        parse_config({"graphs": {"g": "./g.py:x"}, **_nested(key, {"x": 1})}, base_dir=ROOT)
    top = key.split(".")[0]
    assert "\n" not in info.value.detail
    assert f"`{key}`" in info.value.detail or f"`{top}`" in info.value.detail


@pytest.mark.parametrize(
    "key", [k for k, (s, _) in KEYS.items() if s == "ignored" and "." not in k]
)
def test_ignored_keys_load(key: str) -> None:
    config = parse_config({"graphs": {"g": "./g.py:x"}, key: "3.11"}, base_dir=ROOT)
    assert config.graphs[0].graph_id == "g"


def _write() -> None:
    text = README.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{render_table()}\n{END}{tail}")


if __name__ == "__main__":
    if "--write" in sys.argv:
        _write()


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("serde", "revived"),
    [
        ({}, True),  # langgraph's default: revived (with a warning)
        ({"allowed_msgpack_modules": None}, False),  # strict: only langgraph's safe types
        ({"allowed_msgpack_modules": [[__name__, "Point"]]}, True),
        ({"allowed_msgpack_modules": [["elsewhere", "Point"]], "pickle_fallback": False}, False),
    ],
)
def test_checkpointer_serde_reaches_the_serializer(serde: dict[str, Any], revived: bool) -> None:
    config = parse_config(
        {"graphs": {"g": "./g.py:x"}, "checkpointer": {"serde": serde}}, base_dir=ROOT
    )
    serializer = make_serde(None, **config.serde.serializer_kwargs())
    out = serializer.loads_typed(serializer.dumps_typed(Point(1)))
    assert isinstance(out, Point) is revived
    if not revived:
        assert out == {"x": 1}

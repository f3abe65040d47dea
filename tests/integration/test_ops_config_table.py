"""The README's configuration table lists every Settings field with its env var and default.

When a field is added or changed this test fails and prints the whole expected table; paste
it between the README markers, or run
`python -m tests.integration.test_ops_config_table --write` to rewrite that block in place.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from app.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"
START = "<!-- settings-table:start (generated: tests/integration/test_ops_config_table.py) -->"
END = "<!-- settings-table:end -->"
ENV_PREFIX = str(Settings.model_config.get("env_prefix", ""))


def _default(field: Any) -> str:
    value = field.default
    if value is PydanticUndefined and field.default_factory is not None:
        value = field.default_factory()
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def expected_table() -> str:
    """The configuration table generated from `app.config.Settings`."""
    lines = ["| Environment variable | Default | Meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        description = (field.description or "").replace("|", "\\|")
        env = f"{ENV_PREFIX}{name}".upper()
        lines.append(f"| `{env}` | {_default(field)} | {description} |")
    return "\n".join(lines)


def readme_table(text: str) -> str:
    """The table between the README markers ('' when they are missing)."""
    if START not in text or END not in text:
        return ""
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def test_every_field_has_a_description() -> None:
    missing = [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    assert not missing, f"Settings fields without description=: {missing}"


def test_readme_configuration_table_matches_settings() -> None:
    want = expected_table()
    have = readme_table(README.read_text())
    if have != want:
        diff = "\n".join(
            difflib.unified_diff(
                have.splitlines(), want.splitlines(), "README.md", "Settings", lineterm=""
            )
        )
        raise AssertionError(
            "README configuration table is out of date with app.config.Settings.\n"
            "Run `python -m tests.integration.test_ops_config_table --write`, or paste the\n"
            f"table below between the markers.\n\n{diff}\n\n--- expected table ---\n{want}\n"
        )


def test_every_documented_variable_is_a_setting() -> None:
    rows = [ln for ln in readme_table(README.read_text()).splitlines() if ln.startswith("| `")]
    documented = {row.split("`")[1] for row in rows}
    fields = {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}
    assert documented == fields


def _write() -> None:
    text = README.read_text()
    if START not in text:
        raise SystemExit(f"README.md has no {START!r} marker")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    README.write_text(f"{head}{START}\n{expected_table()}\n{END}{tail}")


if __name__ == "__main__":  # pragma: no cover - maintenance helper
    if "--write" in sys.argv:
        _write()
    else:
        sys.stdout.write(expected_table() + "\n")

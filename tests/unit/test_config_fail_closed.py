"""langgraph.json asking for security graphkeep does not implement stops start-up (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.graphs.config import UNHONOURED_SECURITY_KEYS, GraphConfigError, read_config

GRAPHS = {"g": "./g.py:graph"}


def _write(tmp_path: Path, extra: dict[str, Any]) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": GRAPHS, **extra}))
    return path


def _nested(dotted: str, value: Any) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    return {head: _nested(rest, value) if rest else value}


@pytest.mark.parametrize(
    "extra",
    [
        {"encryption": {"path": "./enc.py:encryption"}},
    ],
)
def test_unhonoured_security_key_stops_start_up_naming_it(tmp_path: Path, extra: Any) -> None:
    with pytest.raises(GraphConfigError) as info:
        read_config(_write(tmp_path, extra))
    message = info.value.detail
    assert "\n" not in message and "does not implement" in message
    first = next(d for d, _ in UNHONOURED_SECURITY_KEYS if _has(extra, d))
    assert f"`{first}`" in message


def _has(data: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return data not in (None, False, {}, [], "")


@pytest.mark.parametrize("dotted", [d for d, _ in UNHONOURED_SECURITY_KEYS])
def test_every_listed_key_is_refused(tmp_path: Path, dotted: str) -> None:
    with pytest.raises(GraphConfigError, match=f"`{dotted}`"):
        read_config(_write(tmp_path, _nested(dotted, {"x": 1})))


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"auth": None},
        {"auth": {}},
        {"http": {"disable_store": False, "cors": {"allow_origins": ["*"]}}},
        {"webhooks": {"env_prefix": "LG_WEBHOOK_"}},
        {"checkpointer": {"ttl": {"default_ttl": 60}}},
        {"store": {"ttl": {"default_ttl": 5}}},
        {"python_version": "3.11", "dockerfile_lines": []},
        # honoured since issue 20 (tests/integration/test_http_options.py)
        {"http": {"app": "./app.py:app", "enable_custom_route_auth": True}},
        {"http": {"disable_store": True}},
        {"webhooks": {"url": {"require_https": True, "allowed_domains": ["a.example"]}}},
        {"checkpointer": {"serde": {"pickle_fallback": False}}},
    ],
)
def test_absent_or_empty_security_keys_are_fine(tmp_path: Path, extra: Any) -> None:
    assert read_config(_write(tmp_path, extra)).graphs[0].graph_id == "g"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"checkpointer": {"path": "./cp.py:make"}}, "`checkpointer.path`"),
        ({"priority": {"path": "./p.py:prio"}}, "`priority`"),
        ({"ui": {"agent": "./ui.tsx"}}, "`ui`"),
        ({"checkpointer": {"serde": {"pickle_fallback": True}}}, "pickle_fallback"),
        ({"htpp": {"app": "./app.py:app"}}, "unknown key `htpp`"),
        ({"http": {"cros": None}}, "unknown key `http.cros`"),
        ({"http": {"disable_treads": True}}, "unknown key `http.disable_treads`"),
        ({"webhooks": {"url": {"require_http": True}}}, "unknown key `webhooks.url.require_http`"),
        ({"graphs": {"g": {"path": "./g.py:graph", "descripton": "x"}}}, "`descripton`"),
        ({"http": {"middleware_order": "sideways"}}, "`http.middleware_order`"),
        (
            {"store": {"index": {"dims": 8, "embed": "x:y", "feilds": ["t"]}}},
            "`store.index.feilds`",
        ),
        ({"http": {"cors": {"allow_origins": "*"}}}, "`http.cors.allow_origins`"),
        ({"webhooks": {"headers": {"X-K": "${{ env.HOME }}"}}}, "env_prefix"),
    ],
)
def test_refused_and_unknown_keys_stop_start_up_in_one_line(
    tmp_path: Path, extra: Any, named: str
) -> None:
    with pytest.raises(GraphConfigError) as info:
        read_config(_write(tmp_path, extra))
    assert "\n" not in info.value.detail and named in info.value.detail, info.value.detail


@pytest.mark.slow  # four CLI start-ups
def test_serve_refuses_an_unimportable_auth_path_in_one_line_naming_it(tmp_path: Path) -> None:
    """`auth` is honoured now (issue 20): a path that cannot be imported stops start-up."""
    from tests.e2e.api_server import clean_env, graphkeep

    (tmp_path / "g.py").write_text("from app.examples.chat import graph\n")
    env = clean_env(GRAPHKEEP_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}")
    for target, says in (
        ("./auth.py:auth", "not found"),  # no such file
        ("./g.py:auth", "has no attribute 'auth'"),
        ("./g.py:graph", "not a langgraph_sdk.Auth"),
        ("no_such_module_xyz:auth", "ModuleNotFoundError"),
    ):
        config = _write(tmp_path, {"auth": {"path": target}})
        done = graphkeep("serve", "--port", "0", "--config", str(config), env=env, timeout=60)
        assert done.returncode == 2
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and target in lines[0] and says in lines[0], done.stderr

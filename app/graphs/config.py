"""Parse a langgraph.json-compatible config file (graphs, dependencies, env, store, checkpointer).

Every key of the official schema is honoured, refused at start-up with one line, or ignored
on purpose (build-time keys): app/graphs/config_keys.py, README "langgraph.json keys". An
unknown key stops start-up too. Security-relevant keys graphkeep does not implement
(`encryption`: UNHONOURED_SECURITY_KEYS) are refused first, with the reason. `auth` (`path`,
`openapi`) is honoured: app/auth/custom.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.errors import InvalidInput
from app.graphs.config_keys import check_keys
from app.graphs.http_options import (
    HttpConfigError,
    HttpOptions,
    SerdeOptions,
    WebhookOptions,
    parse_http,
    parse_serde,
    parse_webhooks,
)

JSONObject = dict[str, Any]
_T = TypeVar("_T")
# `http` switches of langgraph.json (the official server's names)
DISABLE_MCP = "disable_mcp"
DISABLE_A2A = "disable_a2a"


class GraphConfigError(InvalidInput):
    """The langgraph.json (or a graph it names) is unusable; start-up stops."""


@dataclass(frozen=True)
class GraphEntry:
    """One entry of the `graphs` map."""

    graph_id: str
    target: str  # "./file.py:attr" or "package.module:attr"
    description: str | None = None
    config: JSONObject = field(default_factory=dict)  # assistant config for the system assistant


@dataclass(frozen=True)
class ServerConfig:
    """The parsed langgraph.json. `base_dir` resolves relative paths."""

    base_dir: Path
    graphs: tuple[GraphEntry, ...]
    dependencies: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    store: JSONObject = field(default_factory=dict)  # {"index": {...}, "ttl": {...}}
    checkpointer: JSONObject = field(default_factory=dict)  # {"ttl": {...}}
    auth: JSONObject = field(default_factory=dict)  # {"path": "./auth.py:auth", "openapi": {}}
    source: Path | None = None  # the file it came from; None for the shipped examples
    raw: JSONObject = field(default_factory=dict)
    http: HttpOptions = field(default_factory=HttpOptions)
    webhooks: WebhookOptions = field(default_factory=WebhookOptions)
    serde: SerdeOptions = field(default_factory=SerdeOptions)

    @property
    def store_index(self) -> JSONObject | None:
        index = self.store.get("index")
        return index if isinstance(index, dict) else None

    @property
    def store_ttl(self) -> JSONObject | None:
        ttl = self.store.get("ttl")
        return ttl if isinstance(ttl, dict) else None

    @property
    def auth_path(self) -> str | None:
        """`auth.path`: the `langgraph_sdk.Auth` object to load ("./auth.py:auth")."""
        path = self.auth.get("path")
        return path if isinstance(path, str) and path else None

    @property
    def auth_openapi(self) -> JSONObject | None:
        """`auth.openapi`: security schemes and requirements merged into openapi.json."""
        spec = self.auth.get("openapi")
        return spec if isinstance(spec, dict) and spec else None

    @property
    def checkpointer_ttl(self) -> JSONObject | None:
        ttl = self.checkpointer.get("ttl")
        return ttl if isinstance(ttl, dict) else None

    def http_flag(self, name: str) -> bool:
        """Whether the `http` section sets `name` to true (e.g. the official `disable_mcp`)."""
        return self.http.is_disabled(name)


def parse_dotenv(text: str) -> dict[str, str]:
    """Minimal .env parser: KEY=VALUE lines, `#` comments, optional `export`, quoted values."""
    result: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        result[key.strip()] = value
    return result


def _parse_graph_entry(graph_id: str, value: Any) -> GraphEntry:
    target: Any
    description: Any
    config: Any
    if isinstance(value, str):
        target, description, config = value, None, {}
    elif isinstance(value, dict):
        unknown = sorted(set(value) - {"path", "description", "config"})
        if unknown:
            raise GraphConfigError(f"graph {graph_id!r}: unknown key `{unknown[0]}`")
        target = value.get("path")
        description = value.get("description")
        config = value.get("config") or {}
        if not isinstance(config, dict):
            raise GraphConfigError(f"graph {graph_id!r}: `config` must be an object")
        if description is not None and not isinstance(description, str):
            raise GraphConfigError(f"graph {graph_id!r}: `description` must be a string")
    else:
        raise GraphConfigError(f'graph {graph_id!r}: expected "path:attr" or an object')
    if not isinstance(target, str) or ":" not in target:
        raise GraphConfigError(
            f"graph {graph_id!r}: {target!r} is not of the form './file.py:attr' or 'module:attr'"
        )
    return GraphEntry(graph_id=graph_id, target=target, description=description, config=config)


# Security-relevant langgraph.json settings graphkeep does not implement (yet). Ignoring one
# would fail open - a project moved over from the official server would come up without the
# protection it asked for - so start-up stops, naming the key. (dotted path, what it asks for)
# Every other key of the schema: app/graphs/config_keys.py (honoured, refused or ignored).
UNHONOURED_SECURITY_KEYS: tuple[tuple[str, str], ...] = (
    ("encryption", "a custom encryption handler (use GRAPHKEEP_ENCRYPTION_KEY)"),
)


def _lookup(data: JSONObject, dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def refuse_unhonoured(data: JSONObject, where: str) -> None:
    """Stop start-up (GraphConfigError, one line) when `data` asks for a security-relevant
    setting graphkeep does not implement. An absent, null, false or empty value is fine."""
    for dotted, asks_for in UNHONOURED_SECURITY_KEYS:
        value = _lookup(data, dotted)
        if value is None or value is False or value == {} or value == [] or value == "":
            continue
        raise GraphConfigError(
            f"{where}: `{dotted}` asks for {asks_for}, which graphkeep does not implement; "
            "remove the key to start (ignoring it would leave the deployment unprotected)"
        )


def parse_config(data: Any, *, base_dir: Path, source: Path | None = None) -> ServerConfig:
    """Validate the decoded JSON; raise GraphConfigError naming the bad entry."""
    where = str(source) if source else "config"
    if not isinstance(data, dict):
        raise GraphConfigError(f"{where}: the top level must be a JSON object")
    refuse_unhonoured(data, where)
    problems = check_keys(data, where)
    if problems:
        raise GraphConfigError(problems[0])
    graphs_raw = data.get("graphs")
    if not isinstance(graphs_raw, dict) or not graphs_raw:
        raise GraphConfigError(f"{where}: `graphs` must be a non-empty object")
    graphs = tuple(_parse_graph_entry(str(gid), value) for gid, value in graphs_raw.items())

    deps_raw = data.get("dependencies") or []
    if not isinstance(deps_raw, list) or not all(isinstance(d, str) for d in deps_raw):
        raise GraphConfigError(f"{where}: `dependencies` must be a list of strings")

    env_raw = data.get("env") or {}
    env: dict[str, str]
    if isinstance(env_raw, str):
        env_path = (base_dir / env_raw).resolve()
        if not env_path.is_file():
            raise GraphConfigError(f"{where}: env file {env_raw!r} not found")
        env = parse_dotenv(env_path.read_text())
    elif isinstance(env_raw, dict):
        env = {str(k): str(v) for k, v in env_raw.items()}
    else:
        raise GraphConfigError(f"{where}: `env` must be an object or a .env file path")

    store = data.get("store") or {}
    checkpointer = data.get("checkpointer") or {}
    for key, value in (("store", store), ("checkpointer", checkpointer)):
        if not isinstance(value, dict):
            raise GraphConfigError(f"{where}: `{key}` must be an object")
    for key in ("index", "ttl"):
        if store.get(key) is not None and not isinstance(store[key], dict):
            raise GraphConfigError(f"{where}: `store.{key}` must be an object")
    if checkpointer.get("ttl") is not None and not isinstance(checkpointer["ttl"], dict):
        raise GraphConfigError(f"{where}: `checkpointer.ttl` must be an object")

    auth = _parse_auth(data.get("auth"), where)
    return ServerConfig(
        base_dir=base_dir,
        auth=auth,
        graphs=graphs,
        dependencies=tuple(deps_raw),
        env=env,
        store=store,
        checkpointer=checkpointer,
        source=source,
        raw=data,
        http=_section(parse_http, data.get("http"), where),
        webhooks=_section(parse_webhooks, data.get("webhooks"), where),
        serde=_section(parse_serde, checkpointer.get("serde"), where),
    )


def _section(parse: Callable[[Any], _T], value: Any, where: str) -> _T:
    try:
        return parse(value)
    except HttpConfigError as exc:
        raise GraphConfigError(f"{where}: {exc.detail.removeprefix('langgraph.json: ')}") from None


# `auth` keys of the official schema; `disable_studio_auth` and `cache` concern LangSmith
# Studio and the platform's auth cache, neither of which graphkeep has (README).
AUTH_KEYS = frozenset({"path", "openapi", "disable_studio_auth", "cache"})


def _parse_auth(raw: Any, where: str) -> JSONObject:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise GraphConfigError(f"{where}: `auth` must be an object")
    unknown = sorted(set(raw) - AUTH_KEYS)
    if unknown:
        raise GraphConfigError(f"{where}: `auth.{unknown[0]}` is not a key of the auth section")
    path = raw.get("path")
    if path is not None and (not isinstance(path, str) or ":" not in path):
        raise GraphConfigError(
            f"{where}: `auth.path` {path!r} is not of the form './auth.py:auth' or 'module:attr'"
        )
    if raw.get("openapi") is not None and not isinstance(raw["openapi"], dict):
        raise GraphConfigError(f"{where}: `auth.openapi` must be an object")
    return dict(raw)


def read_config(path: Path) -> ServerConfig:
    """Read and parse a langgraph.json file (blocking: call it off the event loop)."""
    path = path.resolve()
    if not path.is_file():
        raise GraphConfigError(f"config file {str(path)!r} not found")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphConfigError(f"config file {str(path)!r} is not valid JSON: {exc}") from exc
    return parse_config(data, base_dir=path.parent, source=path)


def apply_environment(config: ServerConfig) -> None:
    """Export `env` (existing variables win, as the official dev server does)."""
    for key, value in config.env.items():
        os.environ.setdefault(key, value)

"""What graphkeep does with every key of the official langgraph.json schema.

Each key is honoured, refused at start-up (one line naming it and why) or deliberately ignored
(build-time keys of the official CLI's Docker image; graphkeep runs from an installed Python
environment). A key in none of these - a typo, or one from a newer schema - stops start-up:
ignoring it silently could drop a setting the deployment relies on. The README's table is
generated from `KEYS` and a test holds both against the official schema's key list
(tests/data/langgraph_json_keys.json, langgraph-cli 0.4.40).
"""

from __future__ import annotations

from typing import Any, Literal

Status = Literal["honoured", "refused", "ignored"]

_BUILD = "build-time key of the official CLI's Docker image; graphkeep runs from your environment"

# dotted key -> (status, what graphkeep does / why)
KEYS: dict[str, tuple[Status, str]] = {
    "python_version": ("ignored", _BUILD),
    "node_version": ("ignored", _BUILD + " (no JS graphs)"),
    "api_version": ("ignored", "selects an official server image; graphkeep is the server"),
    "_INTERNAL_docker_tag": ("ignored", _BUILD),
    "base_image": ("ignored", _BUILD),
    "image_distro": ("ignored", _BUILD),
    "pip_config_file": ("ignored", _BUILD),
    "pip_installer": ("ignored", _BUILD),
    "source": ("ignored", _BUILD + " (`uv` project source)"),
    "source.kind": ("ignored", _BUILD),
    "source.root": ("ignored", _BUILD),
    "source.package": ("ignored", _BUILD),
    "dockerfile_lines": ("ignored", _BUILD),
    "keep_pkg_tools": ("ignored", _BUILD),
    "dependencies": ("honoured", "local paths are put on sys.path; packages must be installed"),
    "graphs": ("honoured", "`path` strings or `{path, description}` (plus graphkeep's `config`)"),
    "env": ("honoured", "an object or a .env file; variables already set win"),
    "store": ("honoured", "the Store"),
    "store.index": ("honoured", "semantic search (pgvector on PostgreSQL, exact on SQLite)"),
    "store.index.dims": ("honoured", "checked against the embedder at start-up"),
    "store.index.embed": ("honoured", "`provider:model` or `./file.py:function`"),
    "store.index.fields": ("honoured", "JSON paths embedded per item"),
    "store.ttl": ("honoured", "Store item TTL"),
    "store.ttl.refresh_on_read": ("honoured", ""),
    "store.ttl.default_ttl": ("honoured", "minutes"),
    "store.ttl.sweep_interval_minutes": ("honoured", ""),
    "checkpointer": ("honoured", "graphkeep's SQL checkpointer"),
    "checkpointer.path": (
        "refused",
        "a custom checkpointer (graphkeep owns its checkpoint tables)",
    ),
    "checkpointer.ttl": ("honoured", "thread TTL"),
    "checkpointer.ttl.strategy": ("honoured", "`delete` or `keep_latest`"),
    "checkpointer.ttl.default_ttl": ("honoured", "minutes"),
    "checkpointer.ttl.sweep_interval_minutes": ("honoured", ""),
    "checkpointer.ttl.sweep_limit": (
        "refused",
        "a per-sweep thread limit (graphkeep sweeps in its own batches)",
    ),
    "checkpointer.serde": ("honoured", "see its keys"),
    "checkpointer.serde.allowed_json_modules": (
        "honoured",
        "graphkeep never revives objects from JSON, so any value is at least as strict",
    ),
    "checkpointer.serde.allowed_msgpack_modules": (
        "honoured",
        "passed to langgraph's JsonPlusSerializer (`null`: only its safe types)",
    ),
    "checkpointer.serde.pickle_fallback": (
        "honoured",
        "`false` is graphkeep's only mode; `true` is refused (pickle runs code on load)",
    ),
    "auth": (
        "honoured",
        "a `langgraph_sdk.Auth` handler: authenticate + `@auth.on` filters (docs/auth.md)",
    ),
    "auth.path": ("honoured", "`./auth.py:auth` or `module:attr`; unimportable stops start-up"),
    "auth.disable_studio_auth": ("ignored", "LangSmith Studio auth; graphkeep has no Studio"),
    "auth.openapi": ("honoured", "merged into /openapi.json"),
    "auth.openapi.securitySchemes": ("honoured", ""),
    "auth.openapi.security": ("honoured", ""),
    "auth.openapi.paths": ("honoured", ""),
    "auth.cache": ("ignored", "the platform's auth cache; graphkeep calls the handler per request"),
    "auth.cache.cache_keys": ("ignored", "with `auth.cache`"),
    "auth.cache.ttl_seconds": ("ignored", "with `auth.cache`"),
    "auth.cache.max_size": ("ignored", "with `auth.cache`"),
    "encryption": ("refused", "a custom encryption handler (use GRAPHKEEP_ENCRYPTION_KEY)"),
    "encryption.path": ("refused", "with `encryption`"),
    "priority": ("refused", "a custom run-priority handler (graphkeep runs in queue order)"),
    "priority.path": ("refused", "with `priority`"),
    "http": ("honoured", "see its keys"),
    "http.app": ("honoured", "a Starlette/FastAPI app: its routes win, its middleware wraps all"),
    "http.disable_assistants": ("honoured", "/assistants routes removed"),
    "http.disable_threads": ("honoured", "/threads routes removed (thread runs stay with runs)"),
    "http.disable_runs": ("honoured", "/runs, /threads/{id}/runs and crons removed"),
    "http.disable_store": ("honoured", "/store routes removed"),
    "http.disable_mcp": ("honoured", "/mcp answers 404"),
    "http.disable_a2a": ("honoured", "/a2a answers 404"),
    "http.disable_meta": ("honoured", "/info, /metrics, /openapi.json, /docs removed; /ok stays"),
    "http.disable_ui": ("honoured", "graphkeep serves no /ui routes"),
    "http.disable_webhooks": ("honoured", "runs still execute; no webhook is sent"),
    "http.cors": ("honoured", "replaces GRAPHKEEP_CORS_ORIGINS"),
    "http.cors.allow_origins": ("honoured", ""),
    "http.cors.allow_methods": ("honoured", ""),
    "http.cors.allow_headers": ("honoured", ""),
    "http.cors.allow_credentials": ("honoured", ""),
    "http.cors.allow_origin_regex": ("honoured", ""),
    "http.cors.expose_headers": ("honoured", "default: graphkeep's pagination headers"),
    "http.cors.max_age": ("honoured", ""),
    "http.configurable_headers": ("honoured", "request headers copied into `configurable`"),
    "http.configurable_headers.includes": ("honoured", "glob patterns (default: x-*, user-agent)"),
    "http.configurable_headers.excludes": ("honoured", "glob patterns, applied first"),
    "http.logging_headers": ("honoured", "request headers written to the access log"),
    "http.logging_headers.includes": ("honoured", "glob patterns (default: none)"),
    "http.logging_headers.excludes": ("honoured", "glob patterns, applied first"),
    "http.middleware_order": ("honoured", "`middleware_first` (default) or `auth_first`"),
    "http.enable_custom_route_auth": ("honoured", "custom routes behind graphkeep's auth"),
    "http.mount_prefix": ("honoured", "every route served under the prefix"),
    "webhooks": ("honoured", "see its keys"),
    "webhooks.env_prefix": ("honoured", "default `LG_WEBHOOK_`"),
    "webhooks.url": ("honoured", "checked when a run is created (422)"),
    "webhooks.url.require_https": ("honoured", ""),
    "webhooks.url.allowed_domains": ("honoured", "exact hosts or `*.example.com`"),
    "webhooks.url.allowed_ports": ("honoured", ""),
    "webhooks.url.max_url_length": ("honoured", ""),
    "webhooks.url.disable_loopback": ("honoured", "graphkeep accepts absolute URLs only"),
    "webhooks.headers": ("honoured", "`${{ env.VAR }}` resolved at start-up"),
    "ui": ("refused", "generative UI components (JS/TS bundles graphkeep does not serve)"),
}

# graphkeep's own keys (not in the official schema), and the JSON-schema pointer editors add
EXTRA_KEYS: dict[str, tuple[Status, str]] = {
    "$schema": ("ignored", "an editor hint"),
    "redact": ("honoured", "graphkeep: keys / dotted paths masked in outputs (README)"),
    "store.index.model": ("honoured", "graphkeep: the embedding model's name, stored with vectors"),
}

# Keys whose values are maps of user-chosen names (not checked below them)
MAPS = frozenset(
    {
        "graphs",  # entries checked by the graph parser
        "env",
        "webhooks.headers",
        "auth.openapi.securitySchemes",
        "auth.openapi.paths",
    }
)
ALL_KEYS: dict[str, tuple[Status, str]] = {**KEYS, **EXTRA_KEYS}


def present_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys present in `data`, parents first (not below MAPS nor below unknown keys)."""
    found: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        found.append(dotted)
        if isinstance(value, dict) and dotted in ALL_KEYS and dotted not in MAPS:
            found.extend(present_keys(value, dotted + "."))
    return found


def check_keys(data: dict[str, Any], where: str) -> list[str]:
    """Problems, one line each: unknown keys (whatever their value) and refused ones (a
    null, false or empty value of a refused key asks for nothing and passes)."""
    problems: list[str] = []
    for dotted in present_keys(data):
        value = _lookup(data, dotted)
        entry = ALL_KEYS.get(dotted)
        if entry is not None and _asks_nothing(value):
            continue
        if entry is None:
            problems.append(
                f"{where}: unknown key `{dotted}` (not in the langgraph.json schema graphkeep "
                "knows); remove it or fix its spelling"
            )
        elif entry[0] == "refused" and not _refused(_parent(dotted)):
            problems.append(
                f"{where}: `{dotted}` asks for {entry[1]}, which graphkeep does not implement; "
                "remove the key to start (ignoring it would change what the deployment does)"
            )
    return problems


def _asks_nothing(value: Any) -> bool:
    return value is None or value is False or value == {} or value == [] or value == ""


def _refused(dotted: str) -> bool:
    entry = ALL_KEYS.get(dotted)
    return entry is not None and entry[0] == "refused"


def _parent(dotted: str) -> str:
    return dotted.rpartition(".")[0]


def _lookup(data: dict[str, Any], dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def render_table() -> str:
    """The README's configuration-key table (Markdown)."""
    lines = ["| key | graphkeep | what / why |", "| --- | --- | --- |"]
    for key, (status, note) in ALL_KEYS.items():
        lines.append(f"| `{key}` | {status} | {note.replace('|', '/')} |")
    return "\n".join(lines)

"""langgraph.json's `http`, `webhooks` and `checkpointer.serde` sections, validated.

Pure parsing (no imports of user code): a wrong type or value stops start-up with one line
naming the key. What each option does is in README "Configuration keys"; where they act:
app/api/custom_app.py (http.app, disable_*, mount_prefix, middleware_order), app/api/middleware.py
(cors, logging_headers), app/runs/prepare.py (configurable_headers), app/runs/webhooks.py.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from app.errors import InvalidInput

MiddlewareOrder = Literal["middleware_first", "auth_first"]
DISABLE_SWITCHES = (
    "disable_assistants",
    "disable_threads",
    "disable_runs",
    "disable_store",
    "disable_mcp",
    "disable_a2a",
    "disable_meta",
    "disable_ui",
    "disable_webhooks",
)
# Credentials never leave the request, whatever the patterns say: copying one into a run's
# config stores it in the database, logging one puts it in the logs (fail closed).
SECRET_HEADERS = frozenset(
    {"authorization", "cookie", "set-cookie", "x-api-key", "x-service-key", "proxy-authorization"}
)
_SECRET_PATTERNS = ("*token*", "*secret*", "*password*", "*api-key*", "*apikey*")
DEFAULT_WEBHOOK_ENV_PREFIX = "LG_WEBHOOK_"
# what a browser may read by default: the pagination headers the SDK uses (as GRAPHKEEP_CORS_*)
DEFAULT_EXPOSE_HEADERS = ("x-pagination-total", "x-pagination-next", "content-location")
_TEMPLATE = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class HttpConfigError(InvalidInput):
    """A bad `http` / `webhooks` / `checkpointer.serde` value; start-up stops."""


# cached: every run create asks this of each request header, five globs a header; bounded
# since the names come from clients
@functools.lru_cache(maxsize=1024)
def _is_secret(name: str) -> bool:
    return name in SECRET_HEADERS or any(fnmatch.fnmatchcase(name, p) for p in _SECRET_PATTERNS)


@dataclass(frozen=True)
class HeaderPatterns:
    """`{"includes": [...], "excludes": [...]}`: lower-case glob patterns. Excludes win;
    without includes, `default_include` decides."""

    includes: tuple[str, ...] | None = None
    excludes: tuple[str, ...] = ()

    def selects(self, name: str, *, default_include: bool) -> bool:
        key = name.lower()
        if _is_secret(key) or any(fnmatch.fnmatchcase(key, p) for p in self.excludes):
            return False
        if self.includes is None:
            return default_include
        return any(fnmatch.fnmatchcase(key, p) for p in self.includes)


def configurable_default(name: str) -> bool:
    """The official server's default for configurable headers: `x-*` and `user-agent`, less
    `x-tenant-id` (graphkeep's routing header) and the secret ones."""
    return (name.startswith("x-") or name == "user-agent") and name != "x-tenant-id"


@dataclass(frozen=True)
class CorsOptions:
    """Keyword arguments for Starlette's CORSMiddleware (the official server passes them as is)."""

    kwargs: dict[str, Any]


@dataclass(frozen=True)
class HttpOptions:
    app: str | None = None
    disabled: frozenset[str] = frozenset()  # e.g. {"disable_store"}
    cors: CorsOptions | None = None
    configurable_headers: HeaderPatterns = field(default_factory=HeaderPatterns)
    logging_headers: HeaderPatterns | None = None
    middleware_order: MiddlewareOrder = "middleware_first"
    enable_custom_route_auth: bool = False
    mount_prefix: str = ""

    def is_disabled(self, switch: str) -> bool:
        return switch in self.disabled


@dataclass(frozen=True)
class WebhookUrlPolicy:
    require_https: bool = False
    allowed_domains: tuple[str, ...] = ()
    allowed_ports: tuple[int, ...] = ()
    max_url_length: int | None = None

    def problem(self, url: str) -> str | None:
        """Why `url` breaks the policy (None: it does not). `url` is an absolute http(s) URL."""
        from urllib.parse import urlsplit

        if self.max_url_length is not None and len(url) > self.max_url_length:
            return f"webhook: longer than {self.max_url_length} characters"
        parts = urlsplit(url)
        if self.require_https and parts.scheme != "https":
            return "webhook: must be an https:// URL"
        host = (parts.hostname or "").lower()
        if self.allowed_domains and not any(_host_allowed(host, d) for d in self.allowed_domains):
            return "webhook: host is not in the allowed domains"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if self.allowed_ports and port not in self.allowed_ports:
            return "webhook: port is not allowed"
        return None


def _host_allowed(host: str, pattern: str) -> bool:
    pattern = pattern.lower()
    if pattern.startswith("*."):  # subdomains only, not the apex (the official rule)
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return host == pattern


@dataclass(frozen=True)
class WebhookOptions:
    env_prefix: str = DEFAULT_WEBHOOK_ENV_PREFIX
    url: WebhookUrlPolicy | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # resolved values


@dataclass(frozen=True)
class SerdeOptions:
    # None: only langgraph's safe msgpack types; True: any (with a warning); list: these too.
    # Unset (`configured` false): langgraph's own default.
    allowed_msgpack_modules: list[tuple[str, ...]] | bool | None = True
    configured: bool = False

    def serializer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for langgraph's JsonPlusSerializer."""
        if not self.configured:
            return {}
        return {"allowed_msgpack_modules": self.allowed_msgpack_modules}


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HttpConfigError(f"langgraph.json: `{key}` must be a list of strings")
    return tuple(value)


def _bool(value: Any, key: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise HttpConfigError(f"langgraph.json: `{key}` must be true or false")
    return value


def _object(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HttpConfigError(f"langgraph.json: `{key}` must be an object")
    return value


def parse_patterns(value: Any, key: str) -> HeaderPatterns:
    raw = _object(value, key)
    includes = raw.get("includes")
    excludes = raw.get("excludes")
    return HeaderPatterns(
        includes=None if includes is None else tuple(p.lower() for p in _strings(includes, key)),
        excludes=() if excludes is None else tuple(p.lower() for p in _strings(excludes, key)),
    )


_CORS_LISTS = ("allow_origins", "allow_methods", "allow_headers", "expose_headers")


def parse_cors(value: Any) -> CorsOptions | None:
    raw = _object(value, "http.cors")
    if value is None:
        return None
    kwargs: dict[str, Any] = {"expose_headers": list(DEFAULT_EXPOSE_HEADERS)}
    for key in _CORS_LISTS:
        if key in raw and raw[key] is not None:
            kwargs[key] = list(_strings(raw[key], f"http.cors.{key}"))
    if raw.get("allow_credentials") is not None:
        kwargs["allow_credentials"] = _bool(raw["allow_credentials"], "http.cors.allow_credentials")
    regex = raw.get("allow_origin_regex")
    if regex is not None:
        if not isinstance(regex, str):
            raise HttpConfigError("langgraph.json: `http.cors.allow_origin_regex` must be a string")
        try:
            re.compile(regex)
        except re.error as exc:
            raise HttpConfigError(
                f"langgraph.json: `http.cors.allow_origin_regex` is not a valid regex: {exc}"
            ) from None
        kwargs["allow_origin_regex"] = regex
    max_age = raw.get("max_age")
    if max_age is not None:
        if not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0:
            raise HttpConfigError("langgraph.json: `http.cors.max_age` must be a whole number >= 0")
        kwargs["max_age"] = max_age
    return CorsOptions(kwargs)


def parse_http(value: Any) -> HttpOptions:
    raw = _object(value, "http")
    app = raw.get("app")
    if app is not None and (not isinstance(app, str) or ":" not in app):
        raise HttpConfigError(
            f"langgraph.json: `http.app` {app!r} is not of the form './file.py:app' or 'module:app'"
        )
    disabled = frozenset(s for s in DISABLE_SWITCHES if _bool(raw.get(s), f"http.{s}"))
    order: MiddlewareOrder
    raw_order = raw.get("middleware_order") or "middleware_first"
    if raw_order == "auth_first":
        order = "auth_first"
    elif raw_order == "middleware_first":
        order = "middleware_first"
    else:
        raise HttpConfigError(
            "langgraph.json: `http.middleware_order` must be 'middleware_first' or 'auth_first'"
        )
    prefix = raw.get("mount_prefix") or ""
    if not isinstance(prefix, str) or (
        prefix and not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", prefix)
    ):
        raise HttpConfigError(
            "langgraph.json: `http.mount_prefix` must be a path such as '/api' (no trailing /)"
        )
    logging_raw = raw.get("logging_headers")
    return HttpOptions(
        app=app,
        disabled=disabled,
        cors=parse_cors(raw.get("cors")),
        configurable_headers=parse_patterns(
            raw.get("configurable_headers"), "http.configurable_headers"
        ),
        logging_headers=None
        if logging_raw is None
        else parse_patterns(logging_raw, "http.logging_headers"),
        middleware_order=order,
        enable_custom_route_auth=_bool(
            raw.get("enable_custom_route_auth"), "http.enable_custom_route_auth"
        ),
        mount_prefix=prefix,
    )


def _resolve_template(value: str, key: str, env_prefix: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if not name.startswith(env_prefix):
            raise HttpConfigError(
                f"langgraph.json: `webhooks.headers.{key}` reads ${name}, which does not start "
                f"with the env_prefix {env_prefix!r}"
            )
        resolved = os.environ.get(name)
        if resolved is None:
            raise HttpConfigError(
                f"langgraph.json: `webhooks.headers.{key}` reads ${name}, which is not set"
            )
        return resolved

    return _TEMPLATE.sub(sub, value)


def parse_webhooks(value: Any) -> WebhookOptions:
    raw = _object(value, "webhooks")
    prefix = raw.get("env_prefix") or DEFAULT_WEBHOOK_ENV_PREFIX
    if not isinstance(prefix, str):
        raise HttpConfigError("langgraph.json: `webhooks.env_prefix` must be a string")
    policy: WebhookUrlPolicy | None = None
    if raw.get("url") is not None:
        url = _object(raw["url"], "webhooks.url")
        ports = url.get("allowed_ports") or []
        if not isinstance(ports, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports
        ):
            raise HttpConfigError(
                "langgraph.json: `webhooks.url.allowed_ports` must be port numbers"
            )
        length = url.get("max_url_length")
        if length is not None and (
            not isinstance(length, int) or isinstance(length, bool) or length < 1
        ):
            raise HttpConfigError("langgraph.json: `webhooks.url.max_url_length` must be >= 1")
        # disable_loopback forbids relative URLs; graphkeep accepts absolute ones only already
        _bool(url.get("disable_loopback"), "webhooks.url.disable_loopback")
        policy = WebhookUrlPolicy(
            require_https=_bool(url.get("require_https"), "webhooks.url.require_https"),
            allowed_domains=_strings(
                url.get("allowed_domains") or [], "webhooks.url.allowed_domains"
            ),
            allowed_ports=tuple(ports),
            max_url_length=length,
        )
    headers: dict[str, str] = {}
    for name, template in _object(raw.get("headers"), "webhooks.headers").items():
        if not isinstance(template, str):
            raise HttpConfigError(f"langgraph.json: `webhooks.headers.{name}` must be a string")
        headers[str(name)] = _resolve_template(template, str(name), prefix)
    return WebhookOptions(env_prefix=prefix, url=policy, headers=headers)


def parse_serde(value: Any) -> SerdeOptions:
    raw = _object(value, "checkpointer.serde")
    if raw.get("pickle_fallback") is True:
        raise HttpConfigError(
            "langgraph.json: `checkpointer.serde.pickle_fallback: true` asks for unpickling "
            "checkpoints (it runs code on load), which graphkeep does not implement; remove it"
        )
    _bool(raw.get("pickle_fallback"), "checkpointer.serde.pickle_fallback")
    json_modules = raw.get("allowed_json_modules")
    if json_modules is not None and not isinstance(json_modules, bool | list):
        raise HttpConfigError(
            "langgraph.json: `checkpointer.serde.allowed_json_modules` must be a list or a boolean"
        )
    if "allowed_msgpack_modules" not in raw:
        return SerdeOptions()
    modules = raw["allowed_msgpack_modules"]
    if modules is None or isinstance(modules, bool):
        return SerdeOptions(allowed_msgpack_modules=modules, configured=True)
    if not isinstance(modules, list) or not all(
        isinstance(m, list) and m and all(isinstance(p, str) for p in m) for m in modules
    ):
        raise HttpConfigError(
            "langgraph.json: `checkpointer.serde.allowed_msgpack_modules` must be null, a "
            'boolean or a list of ["module", "Type"] lists'
        )
    return SerdeOptions(allowed_msgpack_modules=[tuple(m) for m in modules], configured=True)

"""The one Settings object. Built once (by the CLI or a test) and passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./graphkeep.db"


class Settings(BaseSettings):
    """graphkeep configuration; every field reads `GRAPHKEEP_<NAME>` from the environment."""

    model_config = SettingsConfigDict(
        env_prefix="GRAPHKEEP_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    # --- storage
    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy async URL; the default is the embedded SQLite file.",
    )
    db_pool_size: int = Field(10, ge=1, description="Connection pool size (PostgreSQL).")
    db_max_overflow: int = Field(10, ge=0, description="Extra connections beyond the pool.")
    db_timeout_seconds: float = Field(
        10.0, gt=0, description="Connect and pool-checkout timeout; past it the API answers 503."
    )
    encryption_key: SecretStr | None = Field(
        None,
        description="AES key (16, 24 or 32 bytes, raw or base64) that seals every stored copy "
        "of state (README: Encryption at rest).",
    )
    encryption_old_keys: SecretStr | None = Field(
        None,
        description="Comma-separated older keys, read only (rotation: `graphkeep encryption "
        "rotate` re-seals their rows with the current key).",
    )
    redact_keys: list[str] = Field(
        default_factory=list,
        description="JSON keys (`password`) or dotted paths (`user.ssn`) masked in what leaves "
        "the server: stream events, runs/wait with redaction, webhooks, logs, errors.",
    )

    # --- serving
    host: str = Field("127.0.0.1", description="Address `graphkeep serve` binds.")
    port: int = Field(8123, ge=0, le=65535, description="Port `graphkeep serve` binds.")
    config_file: Path | None = Field(
        None, description="langgraph.json-compatible file; the example graphs when unset."
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024, ge=1024, description="Request bodies above this get 413."
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="Allowed CORS origins; none by default."
    )
    console: Literal["on", "off"] = Field(
        "on", description="The built-in web console at /console (and `/` redirecting to it)."
    )
    log_format: Literal["text", "json"] = Field("text", description="Log format.")
    log_level: str = Field("INFO", description="Root log level.")

    # --- auth
    auth: Literal["none", "jwt"] = Field("none", description="Authentication mode.")
    jwt_secret: SecretStr | None = Field(None, description="HS256 shared secret.")
    jwt_algorithms: list[str] = Field(
        default_factory=lambda: ["HS256"], description="Accepted JWT algorithms."
    )
    jwt_public_key_file: Path | None = Field(None, description="PEM public key (RS256/ES256).")
    jwt_jwks_file: Path | None = Field(None, description="JWKS file with public keys.")
    jwt_issuer: str | None = Field(None, description="Required `iss` claim.")
    jwt_audience: str | None = Field(None, description="Required `aud` claim.")
    jwt_leeway_seconds: int = Field(30, ge=0, description="Clock skew allowed on exp / nbf.")
    jwt_tenant_claim: str = Field("tenant_id", description="Claim that names the tenant.")
    auth_tenant_field: str | None = Field(
        None,
        description="Custom auth (langgraph.json `auth.path`): the user field naming the "
        "tenant; unset, every custom-auth user is in tenant `default`.",
    )
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token required on /metrics when set."
    )

    # --- runs and workers
    workers: int = Field(4, ge=0, description="In-process worker tasks of `graphkeep serve`.")
    lease_seconds: float = Field(30.0, ge=1, description="Run lease; recovery happens within it.")
    max_attempts: int = Field(3, ge=1, description="Attempts before a crashing run ends in error.")
    drain_timeout_seconds: float = Field(
        30.0, ge=0, description="How long SIGTERM waits for runs to reach a super-step boundary."
    )
    run_timeout_seconds: float | None = Field(
        None, gt=0, description="Per-run time limit; a run past it ends with status timeout."
    )
    stream_event_retention_seconds: int = Field(
        3600, ge=0, description="How long stream events are kept after their run ends."
    )
    stream_keepalive_seconds: float = Field(
        5.0,
        gt=0,
        description="Silence after which SSE sends `: heartbeat` and wait/join send a newline.",
    )
    cron_poll_seconds: float = Field(
        1.0, gt=0, le=60, description="Longest sleep of the cron scheduler between due checks."
    )
    cron_batch_size: int = Field(
        500, ge=1, le=10_000, description="Due crons one scheduler transaction claims and fires."
    )
    sweep_interval_seconds: float = Field(
        60.0, gt=0, description="How often retention and TTL sweepers run."
    )
    planner_stats_interval_seconds: float = Field(
        5.0,
        ge=0,
        description="PostgreSQL: how often to check whether a young table has grown enough to "
        "analyze (fresh plans before autovacuum gets to it); 0: never.",
    )
    store_max_value_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest Store item value (JSON bytes); above it: 413."
    )
    store_pgvector: Literal["auto", "off"] = Field(
        "auto",
        description="Semantic search on pgvector (HNSW) where the database has the extension "
        "(`auto`), or always scored in process (`off`).",
    )
    redact_wait_answers: bool = Field(
        False,
        description="Mask `redact_keys` in runs/wait and join answers too (the final values).",
    )
    webhook_secret: SecretStr | None = Field(
        None,
        description="Signs each webhook (X-Graphkeep-Signature: sha256=HMAC of the body).",
    )
    webhook_max_attempts: int = Field(
        4, ge=1, le=20, description="Tries per webhook (5xx and connection errors retry)."
    )
    webhook_backoff_seconds: float = Field(
        0.5, gt=0, le=60, description="First retry delay; doubles each time (capped at 30 s)."
    )
    webhook_timeout_seconds: float = Field(10.0, gt=0, description="Per webhook request.")
    worker_metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="`graphkeep worker` serves Prometheus /metrics on this port (host: `host`).",
    )

    # --- protocols (app/protocols/)
    mcp_enabled: bool = Field(
        True, description="Serve MCP at /mcp (langgraph.json `http.disable_mcp` also turns it off)."
    )
    a2a_enabled: bool = Field(
        True,
        description="Serve A2A at /a2a/{assistant_id} and the agent cards "
        "(langgraph.json `http.disable_a2a` also turns it off).",
    )
    protocol_max_message_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest MCP or A2A request body; above it: the protocol's own error.",
    )

    @model_validator(mode="after")
    def _pool_holds_the_long_lived_connections(self) -> Settings:
        """PostgreSQL: a process keeps connections of its pool for its life (the event
        listener's LISTEN; with workers, their liveness lock) and needs one more to serve
        anything. A smaller pool starved every request into the checkout timeout (503), so
        it is refused at start with the reason rather than served broken."""
        if not self.database_url.startswith("postgresql"):
            return self
        needed = 1 + (1 if self.workers else 0) + 1
        if self.db_pool_size + self.db_max_overflow < needed:
            raise ValueError(
                f"db_pool_size + db_max_overflow must be at least {needed} on PostgreSQL "
                f"(the event listener{' and the workers liveness lock' if self.workers else ''} "
                "hold one each for the process's life, and requests need one more)"
            )
        return self

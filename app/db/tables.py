"""The whole data model on one MetaData (SQLAlchemy Core).

Every tenant-owned table carries `tenant_id`, and its main index leads with it. Checkpoint
tables and run events also carry `thread_id`, their distribution key when sharding (Citus):
no hot query on them may join across threads.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)

from app.db.sealed import SealedJSON, SealedText
from app.db.types import JSONType, UTCDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TENANT = String(255)
# Byte-order text on PostgreSQL so a namespace prefix search is an index range scan whatever
# the database collation; SQLite compares bytes already.
PREFIX = Text().with_variant(Text(collation="C"), "postgresql")
ID = String(36)  # canonical lowercase UUID text; portable across dialects
SYSTEM_TENANT = "*"  # owner of the per-graph system assistants, visible to every tenant

# --------------------------------------------------------------------------- assistants

assistants = Table(
    "assistants",
    metadata,
    Column("assistant_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column("graph_id", String(255), nullable=False),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=True),
    Column("config", JSONType, nullable=False),
    Column("context", JSONType, nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_assistants_tenant_created", "tenant_id", "created_at"),
    Index("ix_assistants_tenant_graph", "tenant_id", "graph_id"),
)

assistant_versions = Table(
    "assistant_versions",
    metadata,
    Column(
        "assistant_id",
        ID,
        ForeignKey("assistants.assistant_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("version", Integer, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column("graph_id", String(255), nullable=False),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=True),
    Column("config", JSONType, nullable=False),
    Column("context", JSONType, nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# --------------------------------------------------------------------------- threads

threads = Table(
    "threads",
    metadata,
    Column("thread_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column("status", String(16), nullable=False),  # idle | busy | interrupted | error
    Column("metadata", JSONType, nullable=False),
    Column("config", JSONType, nullable=False),
    # cache of the latest checkpoint's values; sealed with a key (app/db/sealed.py)
    Column("values", SealedJSON, nullable=True),
    Column("interrupts", SealedJSON, nullable=False),
    Column("error", JSONType, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("state_updated_at", UTCDateTime, nullable=False),
    Column("ttl_minutes", Float, nullable=True),
    Column("ttl_strategy", String(16), nullable=True),  # delete | keep_latest
    Column("expires_at", UTCDateTime, nullable=True),
    Index("ix_threads_tenant_created", "tenant_id", "created_at"),
    Index("ix_threads_tenant_status", "tenant_id", "status"),
    Index("ix_threads_expires_at", "expires_at"),
    # PostgreSQL: containment (`metadata @> :filter`: searches, counts and custom-auth owner
    # filters) reads the matching rows from this index instead of the whole tenant
    Index(
        "ix_threads_metadata",
        "metadata",
        postgresql_using="gin",
        postgresql_ops={"metadata": "jsonb_path_ops"},
        info={"dialects": ("postgresql",)},  # the migration drift check reads this
    ).ddl_if(dialect="postgresql"),
)

# --------------------------------------------------------------------------- runs

runs = Table(
    "runs",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column(
        "thread_id",
        ID,
        ForeignKey("threads.thread_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("assistant_id", ID, nullable=False),
    Column("graph_id", String(255), nullable=False),
    # pending | running | success | error | timeout | interrupted
    Column("status", String(16), nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("kwargs", SealedJSON, nullable=False),  # input, command, config...: sealed
    Column("multitask_strategy", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # a pending run is eligible from this time on (after_seconds, retry back-off)
    Column("available_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime, nullable=True),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("worker_id", String(255), nullable=True),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    # set when a cancel is asked for; the executing worker sees it and stops
    Column("cancel_action", String(16), nullable=True),
    Column("cancel_reason", Text, nullable=True),
    Column("error", JSONType, nullable=True),
    Column("temporary", Boolean, nullable=False, server_default=text("false")),
    Index("ix_runs_status_available", "status", "available_at"),
    Index("ix_runs_thread_created", "thread_id", "created_at"),
    Index("ix_runs_tenant_created", "tenant_id", "created_at"),
    Index("ix_runs_lease", "status", "lease_expires_at"),
)

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("thread_id", ID, nullable=False),
    Column("tenant_id", TENANT, nullable=False),
    Column("event", String(255), nullable=False),
    # compact JSON, written once and sent as is (sealed text with a key)
    Column("data", SealedText, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=True),
    Index("ix_run_events_thread", "thread_id"),
    Index("ix_run_events_expires_at", "expires_at"),
)

# The thread-stream protocol's durable per-thread event log: `seq` is allocated per thread
# in the inserting statement (max + 1), so commit order is seq order and a reader polling
# `seq > cursor` never skips a row; `event_id` is stable across connections and restarts.
thread_events = Table(
    "thread_events",
    metadata,
    Column("thread_id", ID, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("tenant_id", TENANT, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("run_id", ID, nullable=True),
    Column("attempt", Integer, nullable=False),
    Column("method", String(64), nullable=False),
    Column("namespace", Text, nullable=False),  # compact JSON list of segments
    Column("data", Text, nullable=False),  # the encoded payload (app/runs/threadlog/codec.py)
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_thread_events_run", "run_id"),
)

# --------------------------------------------------------------------------- crons

crons = Table(
    "crons",
    metadata,
    Column("cron_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    # deleting the assistant or the thread deletes its crons (0008, as the official server)
    Column(
        "assistant_id",
        ID,
        ForeignKey("assistants.assistant_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(  # NULL: stateless, a new thread per firing
        "thread_id", ID, ForeignKey("threads.thread_id", ondelete="CASCADE"), nullable=True
    ),
    Column("user_id", String(255), nullable=True),  # the creator's identity; firings run as it
    Column("schedule", String(255), nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("next_run_date", UTCDateTime, nullable=True),  # NULL: it will not fire again
    Column("end_time", UTCDateTime, nullable=True),
    Column("enabled", Boolean, nullable=False),
    # active | ended | assistant_deleted | thread_deleted (app/crons/schemas.py)
    Column("status", String(32), nullable=False),
    Column("on_run_completed", String(16), nullable=True),
    Column("payload", SealedJSON, nullable=False),  # the run fields of each firing: sealed
    Column("metadata", JSONType, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("last_error", Text, nullable=True),  # why the last due time failed to fire
    # the scheduler's due query is one range of this index (enabled, due by now)
    Index("ix_crons_enabled_next_run_date", "enabled", "next_run_date"),
    Index("ix_crons_tenant_created", "tenant_id", "created_at"),
    Index("ix_crons_assistant_id", "assistant_id"),
    Index("ix_crons_thread_id", "thread_id"),
)

# --------------------------------------------------------------------------- checkpoints

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("tenant_id", TENANT, primary_key=True),
    Column("thread_id", String(255), primary_key=True),
    Column("checkpoint_ns", String(255), primary_key=True),
    Column("checkpoint_id", String(64), primary_key=True),
    Column("parent_checkpoint_id", String(64), nullable=True),
    Column("run_id", String(64), nullable=True),
    Column("type", String(32), nullable=True),
    Column("checkpoint", LargeBinary, nullable=False),  # serialized, without blob values
    Column("metadata", JSONType, nullable=False),
    # channel -> blob version of every value this checkpoint holds ("" = kept inline in
    # `checkpoint`): get fetches exactly these blobs, and the delta-history walk stops at
    # the first ancestor that holds a channel, all without decoding `checkpoint`.
    Column("value_versions", JSONType, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # Leads with run_id, not tenant_id: an index leading with tenant_id alone looks cheaper
    # than the primary key to a planner without statistics (a fresh or fast-growing thread),
    # which then filters the tenant's whole history on every parent-chain step.
    Index("ix_checkpoints_run_id", "run_id", "tenant_id"),
)

checkpoint_blobs = Table(
    "checkpoint_blobs",
    metadata,
    Column("tenant_id", TENANT, primary_key=True),
    Column("thread_id", String(255), primary_key=True),
    Column("checkpoint_ns", String(255), primary_key=True),
    Column("channel", String(255), primary_key=True),
    Column("version", String(64), primary_key=True),
    Column("type", String(32), nullable=False),
    Column("blob", LargeBinary, nullable=True),
)

checkpoint_writes = Table(
    "checkpoint_writes",
    metadata,
    Column("tenant_id", TENANT, primary_key=True),
    Column("thread_id", String(255), primary_key=True),
    Column("checkpoint_ns", String(255), primary_key=True),
    Column("checkpoint_id", String(64), primary_key=True),
    Column("task_id", String(255), primary_key=True),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("task_path", Text, nullable=False, server_default=text("''")),
    Column("channel", String(255), nullable=False),
    Column("type", String(32), nullable=True),
    Column("blob", LargeBinary, nullable=True),
)

# --------------------------------------------------------------------------- store

store_items = Table(
    "store_items",
    metadata,
    Column("tenant_id", TENANT, primary_key=True),
    # namespace labels joined with "." (labels may not contain "."), so a prefix search is an
    # indexed range scan
    Column("prefix", PREFIX, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", SealedJSON, nullable=False),  # sealed with a key (see the README)
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=True),
    Column("ttl_minutes", Float, nullable=True),
    # the put's `index` argument: NULL = the store's default fields, [] = not embedded (index
    # False), else the JSON paths to embed; kept so `graphkeep store reindex` re-embeds each
    # item exactly as it was put
    Column("index_fields", JSONType, nullable=True),
    # No index on updated_at: a put rewrites it, and an indexed column that changes rules out
    # PostgreSQL's HOT update (every put would then write a new entry in every index, and
    # ~65% more WAL). The sweeper's index holds only rows with a TTL, for the same reason.
    Index(
        "ix_store_items_expires_at",
        "expires_at",
        postgresql_where=text("expires_at IS NOT NULL"),
        sqlite_where=text("expires_at IS NOT NULL"),
    ),
    # room on each page for a put's new row version next to the old one (HOT)
    postgresql_with={"fillfactor": "90"},
)

store_vectors = Table(
    "store_vectors",
    metadata,
    Column("tenant_id", TENANT, primary_key=True),
    Column("prefix", PREFIX, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("field_name", Text, primary_key=True),
    Column("model", String(255), nullable=False),
    Column("dims", Integer, nullable=False),
    Column("embedding", LargeBinary, nullable=False),  # little-endian float32
    Column("created_at", UTCDateTime, nullable=False),
)

# --------------------------------------------------------------------------- auth

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("key_hash", String(128), nullable=False, unique=True),
    Column("read_only", Boolean, nullable=False),
    Column("name", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    Index("ix_api_keys_tenant", "tenant_id"),
)

# --------------------------------------------------------------------------- encryption

# Every key id that has sealed state here (not tenant data: one row per key). Start-up
# refuses a configuration that lacks a key still in use; `graphkeep encryption rotate`
# retires the others once no row needs them.
encryption_keys = Table(
    "encryption_keys",
    metadata,
    Column("key_id", String(32), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("retired_at", UTCDateTime, nullable=True),
)

# --------------------------------------------------------------------------- webhooks

# One row per webhook a finished run sent (or tried to): its outcome after the retries.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("tenant_id", TENANT, nullable=False),
    Column("thread_id", ID, nullable=True),
    Column("url", Text, nullable=False),
    Column("status", String(16), nullable=False),  # delivered | failed
    Column("attempts", Integer, nullable=False),
    Column("response_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime, nullable=True),
    Index("ix_webhook_deliveries_tenant", "tenant_id", "created_at"),
)

"""The pgvector path of semantic search, on a real PostgreSQL 16 with pgvector.

The server is the build bundled in the `pgserver` wheel (a dev extra): a throwaway cluster is
initialised and started on a free loopback port for the session. Under CI=true these tests
fail when that cluster cannot start; locally they skip with the reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from langgraph.store.base import PutOp
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import migrate
from app.db.engine import create_engine
from app.db.tables import metadata
from app.store import HashingEmbeddings, SQLStore, pgvector, queries
from app.store.vectors import pack, unpack
from tests.conftest import truncate_all
from tests.pgcluster import Cluster, free_port, pgserver_install

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]

CORPUS = {
    "cats": "cats purr and chase mice; my cats sleep all day",
    "dogs": "dogs bark and fetch the ball in the park",
    "stocks": "the stock market fell as interest rates rose",
    "cooking": "slow cooking a stew with onions and garlic",
    "cat-food": "buying food for cats: wet food or dry food",
    "travel": "a train trip through the alps in winter",
    "kittens": "kittens and cats play with a ball of wool",
    "garden": "onions and garlic grow in the garden in spring",
}
QUERIES = ["where do cats sleep", "garlic onions", "ball", "stock rates", "winter train cats"]


def _index(dims: int = 64, **extra: Any) -> dict[str, Any]:
    return {"dims": dims, "embed": HashingEmbeddings(dims), "fields": ["text"], **extra}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"pgvector tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pgvector_cluster() -> Iterator[Cluster]:
    """PostgreSQL 16 + pgvector from the pgserver wheel, started for this session."""
    # not below pytest's tmp dirs: as root the server runs as `postgres`, which cannot
    # enter /tmp/pytest-of-root
    root = Path(tempfile.mkdtemp(prefix="gk_pgvector_"))
    try:
        bindir = pgserver_install(root)
    except ImportError:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable("pgserver (a dev extra: PostgreSQL with pgvector) is not installed")
    cluster = Cluster(bindir, root, free_port())
    try:
        cluster.init()
        cluster.start()
    except Exception as exc:  # any failure to start is reported alike
        output = getattr(exc, "stderr", b"") or b""
        cluster.remove()
        _unavailable(f"the pgserver cluster did not start: {exc} {output!r} {cluster.log()}")
    try:
        yield cluster
    finally:
        cluster.remove()


async def _admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _database(cluster: Cluster, prefix: str = "gk_pgv") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await _admin(cluster.url, f'CREATE DATABASE "{name}"')
    return f"postgresql+asyncpg://postgres@127.0.0.1:{cluster.port}/{name}"


@pytest.fixture(scope="session")
def pgv_url(pgvector_cluster: Cluster) -> str:
    return asyncio.run(_database(pgvector_cluster))


@pytest.fixture
async def pgv_engine(pgv_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(pgv_url)
    await migrate.upgrade(engine)
    try:
        yield engine
    finally:
        await truncate_all(engine)
        await engine.dispose()


async def _stores(engine: AsyncEngine, **index: Any) -> tuple[SQLStore, SQLStore]:
    """(pgvector, portable) stores on the same database and index."""
    fast = SQLStore(engine, index=_index(**index))
    await fast.setup()
    assert fast.uses_pgvector is True
    slow = SQLStore(engine, index=_index(**index), pgvector="off")
    await slow.setup()
    assert slow.uses_pgvector is False
    return fast, slow


async def _same(
    fast: SQLStore, slow: SQLStore, *args: Any, ties_ok: bool = False, **kwargs: Any
) -> list[Any]:
    """The pgvector store answers as the portable one; with `ties_ok`, items tied with the
    page's last score may differ (HNSW may cut a long run of equal scores by its own order)."""
    got = await fast.asearch(*args, **kwargs)
    want = await slow.asearch(*args, **kwargs)
    assert [i.score for i in got] == pytest.approx([i.score for i in want], abs=1e-5)
    last = want[-1].score if want else None
    assert [
        (i.namespace, i.key)
        for i in got
        if not (ties_ok and i.score == pytest.approx(last, abs=1e-5))
    ] == [
        (i.namespace, i.key)
        for i in want
        if not (ties_ok and i.score == pytest.approx(last, abs=1e-5))
    ]
    return got


async def _scalar(engine: AsyncEngine, sql: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(sql))).scalar()


# ---------------------------------------------------------------------------- detection


async def test_setup_creates_extension_column_and_hnsw_index(pgv_engine: AsyncEngine) -> None:
    store = SQLStore(pgv_engine, index=_index(48))
    assert store.uses_pgvector is None
    await store.setup()
    await store.setup()  # idempotent
    assert store.uses_pgvector is True
    assert await _scalar(pgv_engine, "SELECT extversion FROM pg_extension WHERE extname='vector'")
    definition = await _scalar(
        pgv_engine, "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_store_vectors_hnsw_48'"
    )
    assert "USING hnsw" in definition and "vector_cosine_ops" in definition
    assert "WHERE (dims = 48)" in definition
    # a store used without setup() (as the server does) detects the column on first query
    view = SQLStore(pgv_engine, index=_index(48))
    await view.aput(("d",), "k", {"text": "cats"})
    assert (await view.asearch(("d",), query="cats"))[0].key == "k"
    assert view.uses_pgvector is True
    # the vector column is filled from the portable bytes by every write
    assert await _scalar(pgv_engine, "SELECT vector_dims(embedding_vec) FROM store_vectors") == 48


async def test_off_mode_and_plain_postgres_use_the_portable_path(
    pgv_engine: AsyncEngine, pg_url: str
) -> None:
    off = SQLStore(pgv_engine, index=_index(), pgvector="off")
    await off.setup()
    assert off.uses_pgvector is False
    await off.aput(("d",), "k", {"text": "cats"})
    assert (await off.asearch(("d",), query="cats"))[0].key == "k"
    plain_engine = create_engine(pg_url)  # the system PostgreSQL: no pgvector available
    try:
        plain = SQLStore(plain_engine, index=_index())
        await plain.setup()
        assert plain.uses_pgvector is False
        async with plain_engine.connect() as conn:
            assert not await pgvector.detect(conn)
    finally:
        await plain_engine.dispose()


async def test_no_privilege_to_create_the_extension_falls_back(
    pgvector_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    url = await _database(pgvector_cluster, "gk_pgv_priv")
    name = url.rsplit("/", 1)[1]
    role = f"gk_user_{uuid.uuid4().hex[:8]}"
    await _admin(pgvector_cluster.url, f'CREATE ROLE "{role}" LOGIN')
    await _admin(pgvector_cluster.url, f'ALTER DATABASE "{name}" OWNER TO "{role}"')
    engine = create_engine(url.replace("postgres@", f"{role}@"))
    try:
        store = SQLStore(engine, index=_index())
        with caplog.at_level(logging.WARNING, logger="app.store.pgvector"):
            await store.setup()
        assert store.uses_pgvector is False
        assert "could not be created" in caplog.text
        await store.aput(("d",), "k", {"text": "cats"})
        assert (await store.asearch(("d",), query="cats"))[0].key == "k"
    finally:
        await engine.dispose()


async def test_the_vector_column_decodes_float32_exactly(pgv_engine: AsyncEngine) -> None:
    await SQLStore(pgv_engine, index=_index()).setup()
    values = [1.0, -2.5, 0.1, -0.0, 0.0, 3.4e38, -1.17549435e-38, 1e-40, 1.4e-45, 123456.789]
    blob = pack(values, len(values))
    async with pgv_engine.connect() as conn:
        decoded = (
            await conn.execute(text(f"SELECT {pgvector.FUNCTION}(:b)::real[]"), {"b": blob})
        ).scalar()
    assert decoded == list(unpack(blob))  # bit-exact float32, subnormals included


# ---------------------------------------------------------------------------- queries


@pytest.fixture(params=["planned", "hnsw"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """ "planned": as shipped (a narrowing under EXACT_BELOW items is ranked exactly);
    "hnsw": every query goes through the HNSW index first, even on these small corpora."""
    if request.param == "hnsw":
        monkeypatch.setattr(pgvector, "EXACT_BELOW", 0)
    return str(request.param)


async def test_ranking_equals_the_portable_path(pgv_engine: AsyncEngine, path: str) -> None:
    fast, slow = await _stores(pgv_engine)
    await fast.abatch([PutOp(("docs",), k, {"text": t}) for k, t in CORPUS.items()])
    for query in QUERIES:
        for limit, offset in ((3, 0), (10, 0), (2, 3)):
            await _same(fast, slow, ("docs",), query=query, limit=limit, offset=offset)
    found = await _same(fast, slow, ("docs",), query="where do cats sleep", limit=2)
    assert found[0].key == "cats"
    # a query with no token embeds to a zero vector: every item scores 0, newest first
    await _same(fast, slow, ("docs",), query="!!!", limit=4)


async def test_best_vector_of_an_item_scores_it(pgv_engine: AsyncEngine, path: str) -> None:
    fast, slow = await _stores(pgv_engine, fields=["items[*].text"])
    await fast.abatch(
        [
            PutOp(("p",), "k1", {"items": [{"text": "alpine train"}, {"text": "garlic stew"}]}),
            PutOp(("p",), "k2", {"items": [{"text": "garlic"}, {"text": "cats"}]}),
            PutOp(("p",), "k3", {"items": [{"text": "stock market"}]}),
        ]
    )
    found = await _same(fast, slow, ("p",), query="garlic stew")
    assert found[0].key == "k1" and found[0].score == pytest.approx(1.0, abs=1e-5)
    assert len(found) == 3  # one result per item, not per vector


async def test_tenants_are_isolated(pgv_engine: AsyncEngine, path: str) -> None:
    fast, _ = await _stores(pgv_engine)
    a, b = fast.for_tenant("a"), fast.for_tenant("b")
    await a.aput(("docs",), "mine", {"text": "cats purr"})
    await b.aput(("docs",), "theirs", {"text": "cats purr loudly"})
    assert [i.key for i in await a.asearch(("docs",), query="cats purr")] == ["mine"]
    assert [i.key for i in await b.asearch(("docs",), query="cats purr")] == ["theirs"]
    assert await fast.for_tenant("c").asearch(("docs",), query="cats") == []


async def test_namespace_prefix_and_filter_with_a_query(pgv_engine: AsyncEngine, path: str) -> None:
    fast, slow = await _stores(pgv_engine)
    ops = [PutOp(("docs",), k, {"text": t, "kind": "doc"}) for k, t in CORPUS.items()]
    ops += [
        PutOp(("docs", "sub"), "cats2", {"text": "cats cats cats", "kind": "note", "n": 2}),
        PutOp(("docsx",), "cats3", {"text": "cats cats", "kind": "note", "n": 3}),
        PutOp(("other",), "cats4", {"text": "cats", "kind": "note", "n": 4}),
    ]
    await fast.abatch(ops)
    found = await _same(fast, slow, ("docs",), query="cats", limit=20)
    keys = [i.key for i in found]
    assert "cats2" in keys and "cats3" not in keys and "cats4" not in keys
    notes = await _same(fast, slow, (), query="cats", filter={"kind": "note"}, limit=10)
    assert [i.key for i in notes] == ["cats2", "cats3", "cats4"]
    ranged = await _same(fast, slow, (), query="cats", filter={"n": {"$gte": 3}})
    assert {i.key for i in ranged} == {"cats3", "cats4"}


async def test_selective_filter_is_complete(pgv_engine: AsyncEngine, path: str) -> None:
    # HNSW returns its ef_search nearest vectors before the filter: with few matches among
    # many near rows it comes back short, and the exact ranking takes over
    fast, slow = await _stores(pgv_engine)
    ops = [PutOp(("bulk",), f"n{i}", {"text": f"cats purr {i}", "kind": "x"}) for i in range(400)]
    ops += [PutOp(("bulk",), f"rare{i}", {"text": f"dogs {i}", "kind": "rare"}) for i in range(6)]
    await fast.abatch(ops)
    found = await _same(fast, slow, ("bulk",), query="cats purr", filter={"kind": "rare"}, limit=5)
    assert len(found) == 5 and all(i.key.startswith("rare") for i in found)
    await _same(fast, slow, ("bulk",), query="cats purr", limit=30, offset=5, ties_ok=True)


async def test_hnsw_index_serves_an_unfiltered_query(pgv_engine: AsyncEngine) -> None:
    fast, _ = await _stores(pgv_engine)
    await fast.abatch(
        [PutOp(("big",), f"k{i}", {"text": f"word{i % 97} word{i % 13} cats"}) for i in range(1500)]
    )
    index = fast.index
    assert index is not None
    items, params = queries.search_items(
        "postgresql", fast.tenant_id, "big", None, datetime.now(UTC), limit=10, offset=0
    )
    approximate = pgvector.approximate_statement(items, index.dims, 100, 20)
    vector = await index.embeddings.aembed_query("word5 cats")
    params.update(b_qvec=pgvector.vector_literal(vector), b_model=index.model_id)
    async with pgv_engine.connect() as conn:
        await conn.execute(text("ANALYZE store_vectors"))
        await conn.execute(text("ANALYZE store_items"))
        await conn.execute(text("SET enable_seqscan = off"))
        compiled = approximate.compile(dialect=conn.dialect)
        sql = str(compiled)
        values = compiled.construct_params(params)
        order = compiled.positiontup or []
        plan = await conn.exec_driver_sql("EXPLAIN " + sql, tuple(values[name] for name in order))
        lines = "\n".join(row[0] for row in plan)
    assert "ix_store_vectors_hnsw_64" in lines, lines
    found = await fast.asearch(("big",), query="word5 cats", limit=5)
    assert len(found) == 5 and found[0].score is not None


async def test_expired_items_are_invisible(pgv_engine: AsyncEngine, path: str) -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = SQLStore(pgv_engine, index=_index(), clock=lambda: now[0])
    await store.setup()
    assert store.uses_pgvector
    await store.aput(("t",), "short", {"text": "cats purr"}, ttl=1)
    await store.aput(("t",), "long", {"text": "cats purr too"}, ttl=10)
    now[0] += timedelta(minutes=2)
    assert [i.key for i in await store.asearch(("t",), query="cats purr")] == ["long"]


async def test_reindex_after_a_model_change_fills_the_vector_column(
    pgv_engine: AsyncEngine,
) -> None:
    old, _ = await _stores(pgv_engine, dims=64)
    await old.abatch([PutOp(("docs",), k, {"text": t}) for k, t in CORPUS.items()])
    new, slow = await _stores(pgv_engine, dims=32)
    assert await new.asearch(("docs",), query="cats") == []  # old model's vectors never match
    assert await new.reindex() == len(CORPUS)
    dims = await _scalar(
        pgv_engine, "SELECT array_agg(DISTINCT vector_dims(embedding_vec)) FROM store_vectors"
    )
    assert dims == [32]
    assert await _scalar(pgv_engine, "SELECT to_regclass('ix_store_vectors_hnsw_32')")
    found = await _same(new, slow, ("docs",), query="purr chase mice", limit=3)
    assert found[0].key == "cats"


# ---------------------------------------------------------------------------- schema


async def _cli(url: str, tmp_path: Path, *command: str, dims: int = 24, **env: str) -> str:
    (tmp_path / "emb.py").write_text(
        f"from app.store import HashingEmbeddings\nMODEL = HashingEmbeddings({dims})\n"
    )
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": "app.examples.chat:graph"},
                "store": {
                    "index": {
                        "dims": dims,
                        "embed": "./emb.py:MODEL",
                        "fields": ["text"],
                    }
                },
            }
        )
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHKEEP_")}
    environ.update(GRAPHKEEP_DATABASE_URL=url, GRAPHKEEP_CONFIG_FILE=str(config), **env)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", *command,
        env=environ, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_migrate_command_makes_the_pgvector_objects(
    pgvector_cluster: Cluster, tmp_path: Path
) -> None:
    off_url = await _database(pgvector_cluster, "gk_pgv_off")
    out = await _cli(off_url, tmp_path, "migrate", GRAPHKEEP_STORE_PGVECTOR="off")
    assert "pgvector" not in out
    engine = create_engine(off_url)
    try:
        assert SQLStore(engine).uses_pgvector is None
        async with engine.connect() as conn:
            assert not await pgvector.detect(conn)
    finally:
        await engine.dispose()
    url = await _database(pgvector_cluster, "gk_pgv_cli")
    out = await _cli(url, tmp_path, "migrate")
    assert "semantic search on pgvector, HNSW index for 24 dims" in out
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            assert await pgvector.detect(conn)
        assert await _scalar(engine, "SELECT to_regclass('ix_store_vectors_hnsw_24')")
        old = SQLStore(engine, index=_index(24))
        await old.aput(("d",), "k", {"text": "cats purr"})
        # a new `dims`: reindex makes its HNSW index and fills the column
        out = await _cli(url, tmp_path, "store", "reindex", dims=16)
        assert "re-embedded 1 items" in out
        assert await _scalar(engine, "SELECT to_regclass('ix_store_vectors_hnsw_16')")
        new = SQLStore(engine, index=_index(16))
        assert [i.key for i in await new.asearch(("d",), query="cats")] == ["k"]
        assert new.uses_pgvector is True
    finally:
        await engine.dispose()


def _diff(conn: Connection) -> list[Any]:
    ctx = MigrationContext.configure(
        conn, opts={"compare_type": True, "include_object": pgvector.include_object}
    )
    return list(compare_metadata(ctx, metadata))


def _alembic_check(conn: Connection) -> None:
    cfg = migrate.alembic_config()
    cfg.attributes["connection"] = conn
    command.check(cfg)  # through alembic/env.py; raises on drift


async def test_schema_check_ignores_the_pgvector_objects(pgv_engine: AsyncEngine) -> None:
    store = SQLStore(pgv_engine, index=_index())
    await store.setup()
    assert store.uses_pgvector
    async with pgv_engine.connect() as conn:
        assert await conn.run_sync(_diff) == []
        await conn.run_sync(_alembic_check)
    assert await migrate.is_at_head(pgv_engine)  # what /ready checks

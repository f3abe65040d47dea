"""Semantic search with the offline hashing embedder: ranking, fields, reindex, config forms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import store_vectors
from app.errors import InvalidInput
from app.store import HashingEmbeddings, SQLStore, parse_index_config

CORPUS = {
    "cats": "cats purr and chase mice; my cats sleep all day",
    "dogs": "dogs bark and fetch the ball in the park",
    "stocks": "the stock market fell as interest rates rose",
    "cooking": "slow cooking a stew with onions and garlic",
    "cat-food": "buying food for cats: wet food or dry food",
    "travel": "a train trip through the alps in winter",
}


def _index(dims: int = 256, **extra: Any) -> dict[str, Any]:
    return {"dims": dims, "embed": HashingEmbeddings(dims), "fields": ["text"], **extra}


@pytest.fixture
async def store(engine: AsyncEngine) -> SQLStore:
    s = SQLStore(engine, index=_index())
    await s.abatch([PutOp(("docs",), k, {"text": t, "kind": "doc"}) for k, t in CORPUS.items()])
    return s


async def test_query_ranks_by_score(store: SQLStore) -> None:
    found = await store.asearch(("docs",), query="where do cats sleep", limit=3)
    assert [i.key for i in found][:2] == ["cats", "cat-food"]
    scores = [i.score for i in found]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    stocks = await store.asearch(("docs",), query="stock market rates", limit=1)
    assert [i.key for i in stocks] == ["stocks"]
    page = await store.asearch(("docs",), query="cats food", limit=2, offset=1)
    full = await store.asearch(("docs",), query="cats food", limit=3)
    assert [i.key for i in page] == [i.key for i in full][1:3]


async def test_query_combines_with_namespace_and_filter(store: SQLStore) -> None:
    await store.aput(("other",), "cats2", {"text": "cats cats cats", "kind": "note"})
    found = await store.asearch(("docs",), query="cats", limit=10)
    assert "cats2" not in [i.key for i in found]
    filtered = await store.asearch((), query="cats", filter={"kind": "note"})
    assert [i.key for i in filtered] == ["cats2"]


async def test_index_false_and_per_item_fields(store: SQLStore) -> None:
    await store.aput(("docs",), "hidden", {"text": "cats cats cats"}, index=False)
    await store.aput(
        ("docs",), "titled", {"text": "unrelated words", "title": "cats everywhere"}, ["title"]
    )
    keys = [i.key for i in await store.asearch(("docs",), query="cats", limit=20)]
    assert "hidden" not in keys  # never matches a query, but is still stored
    assert keys[0] == "titled"
    assert (await store.aget(("docs",), "hidden")) is not None
    plain = [i.key for i in await store.asearch(("docs",), limit=20)]
    assert "hidden" in plain


async def test_json_path_fields_one_vector_per_list_element(engine: AsyncEngine) -> None:
    store = SQLStore(engine, index=_index(fields=["items[*].text", "meta.title"]))
    await store.aput(
        ("p",),
        "k",
        {"items": [{"text": "alpine train"}, {"text": "garlic stew"}], "meta": {"title": "t"}},
    )
    async with engine.connect() as conn:
        names = sorted((await conn.execute(select(store_vectors.c.field_name))).scalars().all())
    assert names == ["items[*].text.0", "items[*].text.1", "meta.title"]
    for query in ("garlic stew", "alpine train"):
        found = await store.asearch(("p",), query=query)
        assert found[0].key == "k" and found[0].score == pytest.approx(1.0, abs=1e-5)


async def test_update_replaces_vectors_and_delete_removes_them(store: SQLStore) -> None:
    await store.aput(("docs",), "travel", {"text": "garlic and onions"})
    found = await store.asearch(("docs",), query="garlic onions", limit=2)
    assert {i.key for i in found} == {"travel", "cooking"}
    await store.adelete(("docs",), "cooking")
    found = await store.asearch(("docs",), query="garlic onions", limit=1)
    assert [i.key for i in found] == ["travel"]
    async with store.engine.connect() as conn:
        keys = (await conn.execute(select(store_vectors.c.key))).scalars().all()
    assert "cooking" not in keys


async def test_model_change_needs_reindex(engine: AsyncEngine, store: SQLStore) -> None:
    other = SQLStore(engine, index=_index(dims=64))
    # vectors of the old model are never compared with the new model's query vectors
    assert await other.asearch(("docs",), query="cats") == []
    assert await other.reindex() == len(CORPUS)
    assert (await other.asearch(("docs",), query="cats mice", limit=1))[0].key == "cats"
    assert await other.reindex() == 0
    async with engine.connect() as conn:
        models = set((await conn.execute(select(store_vectors.c.model))).scalars())
    assert models == {"hashing-bow-v1/64"}


async def test_items_put_without_an_index_are_embedded_by_reindex(engine: AsyncEngine) -> None:
    plain = SQLStore(engine)
    await plain.aput(("n",), "a", {"text": "cats purr"})
    await plain.aput(("n",), "b", {"text": "stock market"}, index=False)
    indexed = SQLStore(engine, index=_index())
    assert await indexed.reindex() == 1
    assert [i.key for i in await indexed.asearch(("n",), query="cats")] == ["a"]


async def _sync_embed(texts: list[str]) -> list[list[float]]:
    return HashingEmbeddings(32).embed_documents(texts)


def _plain_embed(texts: list[str]) -> list[list[float]]:
    return HashingEmbeddings(32).embed_documents(list(texts))


@pytest.mark.parametrize(
    "embed",
    [
        HashingEmbeddings(32),
        _plain_embed,
        _sync_embed,
        "app.store.embeddings:HashingEmbeddings",
    ],
    ids=["embeddings", "function", "async-function", "import-string"],
)
async def test_embed_config_forms(engine: AsyncEngine, embed: Any) -> None:
    store = SQLStore(engine, index={"dims": 32, "embed": embed, "fields": ["text"]})
    await store.aput(("e",), "cats", {"text": CORPUS["cats"]})
    await store.aput(("e",), "dogs", {"text": CORPUS["dogs"]})
    assert (await store.asearch(("e",), query="cats and mice"))[0].key == "cats"


def test_import_string_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "emb.py").write_text(
        "from app.store.embeddings import HashingEmbeddings\nMODEL = HashingEmbeddings(16)\n"
    )
    index = parse_index_config({"dims": 16, "embed": "./emb.py:MODEL"}, base_dir=tmp_path)
    assert index.model_id == "hashing-bow-v1/16"
    assert index.fields == ("$",)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"embed": "app.store.embeddings:hashing_embeddings"}, "dims"),
        ({"dims": 0, "embed": "app.store.embeddings:hashing_embeddings"}, "dims"),
        ({"dims": 8}, "embed"),
        ({"dims": 8, "embed": "app.store.embeddings:nope"}, "no attribute"),
        ({"dims": 8, "embed": "./missing.py:x"}, "not found"),
        ({"dims": 8, "embed": HashingEmbeddings(8), "fields": "text"}, "fields"),
    ],
)
def test_bad_index_config(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_index_config(raw)


async def test_embedder_with_wrong_dims_is_a_clear_error(engine: AsyncEngine) -> None:
    store = SQLStore(engine, index={"dims": 10, "embed": HashingEmbeddings(12)})
    with pytest.raises(InvalidInput, match="12 dimensions"):
        await store.aput(("x",), "k", {"text": "hello"})
    assert await store.aget(("x",), "k") is None

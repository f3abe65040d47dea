"""`graphkeep store reindex` re-embeds after a model change (both dialects)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.cli import main
from app.db.engine import create_engine
from app.store import HashingEmbeddings, SQLStore
from tests.conftest import truncate_all

DOCS = {"cats": "cats purr and chase mice", "stocks": "the stock market fell"}


async def _put_with_old_model(url: str) -> None:
    engine = create_engine(url, null_pool=True)
    try:
        store = SQLStore(engine, index={"dims": 64, "embed": HashingEmbeddings(64)})
        for key, text in DOCS.items():
            await store.for_tenant("cli").aput(("docs",), key, {"text": text})
    finally:
        await engine.dispose()


async def _search_with_new_model(url: str, query: str) -> list[str]:
    engine = create_engine(url, null_pool=True)
    try:
        store = SQLStore(engine, index={"dims": 128, "embed": HashingEmbeddings(128)})
        found = await store.for_tenant("cli").asearch(("docs",), query=query)
        return [item.key for item in found]
    finally:
        await engine.dispose()


async def _clean(url: str) -> None:
    engine = create_engine(url, null_pool=True)
    try:
        await truncate_all(engine)
    finally:
        await engine.dispose()


def test_reindex_after_a_model_change(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHKEEP_DATABASE_URL", db_url)
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": "app.examples.chat:graph"},
                "store": {
                    "index": {
                        "dims": 128,
                        "embed": "app.store.embeddings:HashingEmbeddings",
                        "fields": ["text"],
                    }
                },
            }
        )
    )
    try:
        asyncio.run(_put_with_old_model(db_url))
        assert asyncio.run(_search_with_new_model(db_url, "cats")) == []  # old vectors
        assert main(["store", "reindex", "--config", str(config)]) == 0
        assert "re-embedded 2 items (model hashing-bow-v1/128)" in capsys.readouterr().out
        assert asyncio.run(_search_with_new_model(db_url, "cats mice"))[0] == "cats"
        assert main(["store", "reindex", "--config", str(config)]) == 0
        assert "re-embedded 0 items" in capsys.readouterr().out
    finally:
        asyncio.run(_clean(db_url))


def test_reindex_without_an_index_says_so(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHKEEP_DATABASE_URL", db_url)
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"agent": "app.examples.chat:graph"}}))
    assert main(["store", "reindex", "--config", str(config)]) == 2
    assert "no store.index" in capsys.readouterr().err

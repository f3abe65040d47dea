"""Vectors: what to embed for an item, float32 packing, cosine scoring in process."""

from __future__ import annotations

import asyncio
import math
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langgraph.store.base import PutOp, SearchOp, get_text_at_path

from app.errors import InvalidInput
from app.store.config import StoreIndex

K = TypeVar("K")


def texts_to_embed(
    index: StoreIndex, value: Mapping[str, Any], index_fields: list[str] | None
) -> list[tuple[str, str]]:
    """(field name, text) pairs for an item, as langgraph's stores name them.

    A path that yields several texts (`items[*].text`) gives one vector per text, named
    `path.0`, `path.1`, ...; the item's score is the best of its vectors.
    """
    pairs: list[tuple[str, str]] = []
    for path, tokens in index.paths_for(index_fields):
        texts = get_text_at_path(value, tokens)
        if len(texts) == 1:
            pairs.append((path, texts[0]))
        else:
            pairs.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
    return pairs


def pack(vector: Sequence[float], dims: int) -> bytes:
    """Little-endian float32 bytes; the embedder must return `dims` numbers."""
    if len(vector) != dims:
        raise InvalidInput(f"the embedder returned {len(vector)} dimensions; the index has {dims}")
    packed = array("f", vector)
    if not all(math.isfinite(x) for x in packed):
        # NaN scores nothing; an infinity (or a float32 overflow) cannot be compared either
        raise InvalidInput("the embedder returned a non-finite number (NaN or infinity)")
    if sys.byteorder == "big":  # pragma: no cover - stored bytes are little-endian everywhere
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes) -> array[float]:
    vector = array("f")
    vector.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        vector.byteswap()
    return vector


def cosine_scores(query: Sequence[float], blobs: Sequence[bytes]) -> list[float]:
    """Cosine similarity of `query` with each packed vector (0.0 for a zero vector)."""
    if not blobs:
        return []
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with langchain-core's stack
        return [_cosine(query, unpack(blob)) for blob in blobs]
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    dots = matrix @ q
    safe = np.where(norms == 0, 1.0, norms)
    return [float(x) for x in np.where(norms == 0, 0.0, dots / safe)]


def rank(scored: Iterable[tuple[float, Any]]) -> list[tuple[float, Any]]:
    """Each item's best (score, row) among its vectors' rows, in the documented order:
    score descending, then newest `updated_at`, then key, then namespace."""
    best: dict[tuple[str, str], tuple[float, Any]] = {}
    for score, row in scored:
        ident = (row.prefix, row.key)
        if ident not in best or score > best[ident][0]:
            best[ident] = (score, row)
    return sorted(
        best.values(),
        key=lambda sr: (-sr[0], -sr[1].updated_at.timestamp(), sr[1].key, sr[1].prefix),
    )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def embed_fields(
    index: StoreIndex, wanted: Mapping[K, list[tuple[str, str]]]
) -> dict[K, list[tuple[str, bytes]]]:
    """Embed every (field, text) of every item with one call to the embedder."""
    texts = list(dict.fromkeys(text for pairs in wanted.values() for _, text in pairs))
    if not texts:
        return {ident: [] for ident in wanted}
    vectors = await index.embeddings.aembed_documents(texts)
    if len(vectors) != len(texts):
        raise InvalidInput(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
    packed = {text: pack(vector, index.dims) for text, vector in zip(texts, vectors, strict=True)}
    return {
        ident: [(field_name, packed[text]) for field_name, text in pairs]
        for ident, pairs in wanted.items()
    }


async def embed_queries(
    index: StoreIndex | None, searches: list[SearchOp]
) -> dict[str, list[float]]:
    """The query vector of each distinct query of a batch's semantic searches."""
    queries_ = list(dict.fromkeys(op.query for op in searches if op.query is not None))
    if not queries_:
        return {}
    if index is None:
        raise InvalidInput(
            "semantic search needs an index: configure `store.index` (dims, embed, fields)"
        )
    vectors = await asyncio.gather(*(index.embeddings.aembed_query(q) for q in queries_))
    return dict(zip(queries_, vectors, strict=True))


async def embed_puts(
    index: StoreIndex | None, puts: dict[tuple[str, str], PutOp]
) -> dict[tuple[str, str], list[tuple[str, bytes]]]:
    """The (field, packed vector) pairs of each put item that is indexed."""
    if index is None:
        return {}
    wanted: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for ident, op in puts.items():
        if op.value is None or op.index is False:
            continue
        wanted[ident] = texts_to_embed(index, op.value, op.index)
    return await embed_fields(index, wanted)

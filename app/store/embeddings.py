"""An offline embedder for examples and tests: hashed bag of words.

`HashingEmbeddings` needs no network and no model download. It measures *lexical* overlap
(shared words), not meaning: "car" and "automobile" are unrelated to it. Real models plug in
through the `store.index.embed` config (for example sentence-transformers, an optional extra).
"""

from __future__ import annotations

import hashlib
import math
import re

from langchain_core.embeddings import Embeddings

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddings(Embeddings):
    """Hashed bag-of-words vectors (the "hashing trick"), L2-normalised.

    Each lower-cased word is hashed (BLAKE2b, stable across processes) to one of `dims`
    buckets with a sign, and the counts are normalised, so cosine similarity is the overlap of
    the two texts' words. Deterministic, fast, and honest about what it is not: a language
    model.
    """

    def __init__(self, dims: int = 256) -> None:
        if dims < 1:
            raise ValueError("dims must be positive")
        self.dims = dims

    @property
    def model_id(self) -> str:
        """Identifies the vector space: vectors from another model id are stale."""
        return f"hashing-bow-v1/{self.dims}"

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:7], "little") % self.dims
            vector[bucket] += 1.0 if digest[7] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (one vector each)."""
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return self._embed(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        # cheap pure-Python work: no thread hop
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


# `"embed": "app.store.embeddings:hashing_embeddings"` in langgraph.json (256 dims)
hashing_embeddings = HashingEmbeddings(256)

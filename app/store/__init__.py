"""Long-term memory: `SQLStore`, a langgraph `BaseStore` on the app's SQL database."""

from app.store.config import StoreIndex, parse_index_config, parse_ttl_config
from app.store.embeddings import HashingEmbeddings
from app.store.store import SQLStore

__all__ = [
    "HashingEmbeddings",
    "SQLStore",
    "StoreIndex",
    "parse_index_config",
    "parse_ttl_config",
]

"""The `store` section of a langgraph.json-style config: semantic index and TTL.

```json
"store": {
  "index": {"dims": 256, "embed": "app.store.embeddings:hashing_embeddings",
            "fields": ["text", "items[*].text"]},
  "ttl": {"default_ttl": 60, "refresh_on_read": true, "sweep_interval_minutes": 5}
}
```

`embed` may be a LangChain `Embeddings` object, a sync or async function of a list of texts,
an import string `"module:attr"` (or `"./file.py:attr"`), or a LangChain provider string such
as `"openai:text-embedding-3-small"` (needs that provider's package).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import TTLConfig, ensure_embeddings, tokenize_path

from app.errors import InvalidInput

WHOLE_DOCUMENT = "$"


@dataclass(frozen=True)
class StoreIndex:
    """A parsed semantic index: the embedder, its vector size, the fields to embed."""

    dims: int
    embeddings: Embeddings
    fields: tuple[str, ...] = (WHOLE_DOCUMENT,)
    model_id: str = ""
    tokenized: tuple[tuple[str, tuple[str, ...]], ...] = field(default=(), repr=False)

    def paths_for(self, index_fields: list[str] | None) -> list[tuple[str, list[str] | str]]:
        """(path, tokens) pairs to embed: the item's own field list, or the default fields."""
        if index_fields is None:
            return [(p, list(t) if p != WHOLE_DOCUMENT else p) for p, t in self.tokenized]
        return [(p, tokenize_path(p) if p != WHOLE_DOCUMENT else p) for p in index_fields]


def _load_attr(spec: str, base_dir: Path | None) -> Any:
    module_part, _, attr_path = spec.rpartition(":")
    if module_part.endswith(".py"):
        path = Path(module_part)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise InvalidInput(f"store.index.embed: file {str(path)!r} not found")
        name = f"_graphkeep_embed_{abs(hash(str(path.resolve())))}"
        file_spec = importlib.util.spec_from_file_location(name, path)
        if file_spec is None or file_spec.loader is None:
            raise InvalidInput(f"store.index.embed: cannot import {str(path)!r}")
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[name] = module
        file_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_part)
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise InvalidInput(f"store.index.embed: {spec!r} has no attribute {part!r}")
        target = getattr(target, part)
    return target


def _is_import_string(spec: str) -> bool:
    module_part, sep, attr_path = spec.rpartition(":")
    if not sep or not module_part or not attr_path:
        return False
    if module_part.endswith(".py"):
        return True
    if not all(part.isidentifier() for part in attr_path.split(".")):
        return False
    try:
        return importlib.util.find_spec(module_part.split(".")[0]) is not None and all(
            part.isidentifier() for part in module_part.split(".")
        )
    except (ImportError, ValueError):
        return False


def _model_id(embed: Any, spec: str | None, dims: int) -> str:
    explicit = getattr(embed, "model_id", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    for attr in ("model", "model_name"):
        name = getattr(embed, attr, None)
        if isinstance(name, str) and name:
            return f"{type(embed).__name__}:{name}/{dims}"
    if spec:
        return f"{spec}/{dims}"
    target = embed if inspect.isfunction(embed) or inspect.ismethod(embed) else type(embed)
    return f"{target.__module__}.{target.__qualname__}/{dims}"


def parse_index_config(raw: Mapping[str, Any], *, base_dir: Path | None = None) -> StoreIndex:
    """Build a `StoreIndex` from `store.index` (`dims`, `embed`, optional `fields`, `model`).

    `model` (optional, not in langgraph's schema) names the model explicitly; otherwise the
    id comes from the embedder (`model_id`, `model` or `model_name` attribute) or the import
    string. Vectors are stored with it, and `graphkeep store reindex` re-embeds when it changes.
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput("store.index must be an object")
    dims = raw.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise InvalidInput("store.index.dims must be a positive integer")
    embed = raw.get("embed")
    if embed is None:
        raise InvalidInput("store.index.embed is required")
    spec = embed if isinstance(embed, str) else None
    embed_obj: Any = embed  # an Embeddings, a function, or what an import string names
    if isinstance(embed, str) and _is_import_string(embed):
        embed_obj = _load_attr(embed, base_dir)
        if inspect.isclass(embed_obj):  # an Embeddings class: instantiate it for these dims
            factory: Any = embed_obj
            params = inspect.signature(factory).parameters
            embed_obj = factory(dims=dims) if "dims" in params else factory()
    try:
        embeddings = ensure_embeddings(embed_obj)
    except (ValueError, ImportError, TypeError) as exc:
        raise InvalidInput(f"store.index.embed: {exc}") from exc
    fields_raw = raw.get("fields") or [WHOLE_DOCUMENT]
    if not isinstance(fields_raw, list) or not all(isinstance(f, str) and f for f in fields_raw):
        raise InvalidInput("store.index.fields must be a list of JSON paths")
    tokenized = tuple(
        (p, tuple(tokenize_path(p)) if p != WHOLE_DOCUMENT else (WHOLE_DOCUMENT,))
        for p in fields_raw
    )
    explicit_model = raw.get("model")
    model_id = (
        explicit_model
        if isinstance(explicit_model, str) and explicit_model
        else _model_id(embed_obj, spec, dims)
    )
    return StoreIndex(
        dims=dims,
        embeddings=embeddings,
        fields=tuple(fields_raw),
        model_id=model_id,
        tokenized=tokenized,
    )


DIMS_PROBE = "graphkeep: store.index.dims check"


async def check_index_dims(index: StoreIndex) -> str | None:
    """Embed one probe text and compare its length with `store.index.dims`, so a mismatch
    stops start-up with one line naming the setting instead of failing the first write.

    Raises InvalidInput on a mismatch. An embedder that cannot answer now (a remote model on
    a host without its network) is not a configuration error: the reason is returned for a
    warning, and the first write reports it as before.
    """
    try:
        vector = await index.embeddings.aembed_query(DIMS_PROBE)
    except Exception as exc:  # any failure of the user's embedder; a mismatch is below
        return f"{type(exc).__name__}: {exc}"
    if len(vector) != index.dims:
        raise InvalidInput(
            f"store.index.dims is {index.dims} but the embedder ({index.model_id}) returns "
            f"{len(vector)}-dimensional vectors: set store.index.dims to {len(vector)}"
        )
    return None


def parse_ttl_config(raw: Mapping[str, Any]) -> TTLConfig:
    """Validate `store.ttl`: `default_ttl` (minutes), `refresh_on_read`,
    `sweep_interval_minutes`."""
    if not isinstance(raw, Mapping):
        raise InvalidInput("store.ttl must be an object")
    unknown = set(raw) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"}
    if unknown:
        raise InvalidInput(f"store.ttl: unknown keys {sorted(unknown)}")
    config: TTLConfig = {"refresh_on_read": True}
    default_ttl = raw.get("default_ttl")
    if default_ttl is not None:
        if isinstance(default_ttl, bool) or not isinstance(default_ttl, int | float):
            raise InvalidInput("store.ttl.default_ttl must be a number of minutes")
        if default_ttl <= 0:
            raise InvalidInput("store.ttl.default_ttl must be positive")
        config["default_ttl"] = float(default_ttl)
    refresh = raw.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise InvalidInput("store.ttl.refresh_on_read must be true or false")
    config["refresh_on_read"] = refresh
    interval = raw.get("sweep_interval_minutes")
    if interval is not None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise InvalidInput("store.ttl.sweep_interval_minutes must be a positive integer")
        config["sweep_interval_minutes"] = interval
    return config

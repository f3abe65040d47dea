"""JSON decoding: orjson when it happens to be installed (several times faster on big
streams), else the standard library. Not a dependency: httpx stays the only one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

loads: Callable[[bytes], Any]
try:
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    loads = json.loads
else:
    loads = orjson.loads

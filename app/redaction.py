"""Redaction: sensitive keys masked in what leaves the server.

Encryption protects storage; redaction protects what leaves: stream events (SSE, run and
thread streams), `runs/wait` answers when asked (`redact_wait_answers`), webhook payloads,
log lines and error messages. Checkpoints and the thread's state keep the real values: the
graph needs them.

Configured as `GRAPHKEEP_REDACT_KEYS` (a JSON list) or langgraph.json `"redact": [...]`:

- a bare key (`password`) masks the value under that key at any depth;
- a dotted path (`user.ssn`) masks a value whose key path ends with those keys, at any depth
  (an `updates` event nests state under the node name, so paths are matched as suffixes).

Masked values become `"[redacted]"`. Free text (log lines, error messages) is searched for
`key: value` / `key=value` / `"key": "value"` spellings of the bare keys and each path's last
key. Process-wide (installed at start-up) because log formatters and SSE framing have no
per-request state to carry it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

MASK = "[redacted]"


class Redactor:
    def __init__(self, entries: Iterable[str] = ()) -> None:
        cleaned = [e.strip() for e in entries if e and e.strip()]
        self.keys = frozenset(e for e in cleaned if "." not in e)
        self.paths = tuple(tuple(e.split(".")) for e in cleaned if "." in e)
        words = sorted(self.keys | {p[-1] for p in self.paths})
        self._text = (
            re.compile(
                r"""(?P<q>["']?)\b(?P<k>"""
                + "|".join(re.escape(w) for w in words)
                + r""")(?P=q)(?P<sep>\s*[:=]\s*)"""
                + r"""(?P<v>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;}\])"']+)"""
            )
            if words
            else None
        )

    @property
    def enabled(self) -> bool:
        return bool(self.keys or self.paths)

    def value(self, value: Any) -> Any:
        """A JSON value with every configured key / path masked (a copy; input untouched)."""
        if not self.enabled:
            return value
        return self._walk(value, ())

    def _walk(self, value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, sub in value.items():
                here = (*path, str(key))
                out[key] = MASK if self._hit(here) else self._walk(sub, here)
            return out
        if isinstance(value, list | tuple):
            return [self._walk(sub, path) for sub in value]
        return value

    def _hit(self, path: tuple[str, ...]) -> bool:
        if path[-1] in self.keys:
            return True
        return any(len(path) >= len(p) and path[-len(p) :] == p for p in self.paths)

    def json_text(self, text: str) -> str:
        """Compact JSON text (a stream event's data) with the configured keys masked."""
        if not self.enabled:
            return text
        try:
            parsed = json.loads(text)
        except ValueError:
            return self.text(text)
        masked = self._walk(parsed, ())
        if masked == parsed:
            return text
        return json.dumps(masked, separators=(",", ":"), ensure_ascii=False)

    def text(self, text: str) -> str:
        """Free text (a log line, an error message) with `key: value` spellings masked."""
        if self._text is None:
            return text
        return self._text.sub(lambda m: f"{m['q']}{m['k']}{m['q']}{m['sep']}{MASK}", text)


_active = Redactor()


def install(redactor: Redactor) -> None:
    global _active
    _active = redactor


def active() -> Redactor:
    return _active

"""Importing the project's own code named by langgraph.json (graphs, `auth.path`, `http.app`).

A target is `./file.py:attr` (a file relative to the config's folder) or `package.module:attr`.
Files are imported under a name of their own (so two projects' `graph.py` never collide) and
registered in `sys.modules` before they run, so dataclasses and pickling inside them resolve.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


class UserModuleError(Exception):
    """The file is missing or cannot be loaded: `detail` says which (one line)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def is_file_target(module_part: str) -> bool:
    return module_part.endswith(".py") or "/" in module_part or "\\" in module_part


def import_user_module(module_part: str, base_dir: Path, *, namespace: str) -> ModuleType:
    """The module of a target's part before `:`. Raises UserModuleError for a missing or
    unloadable file; an error raised while importing it propagates as it is."""
    if not is_file_target(module_part):
        return importlib.import_module(module_part)
    path = (base_dir / module_part).resolve()
    if not path.is_file():
        raise UserModuleError(f"file {str(path)!r} not found")
    name = f"{namespace}_{abs(hash(path)):x}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserModuleError(f"cannot load {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def add_dependency_paths(base_dir: Path, dependencies: list[str]) -> None:
    """langgraph.json's local `dependencies` (folders) made importable, as the graphs see them."""
    for dep in dependencies:
        path = (base_dir / dep).resolve()
        if path.is_dir() and str(path) not in sys.path:
            sys.path.insert(0, str(path))

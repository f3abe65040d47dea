"""The checkpoint tree of a thread, one page at a time, without loading any blob.

The console draws every checkpoint of a thread (all namespaces) as a tree. A page holds the
headers only: ids, parent ids, metadata and time; plus the names of the tasks whose writes
are stored against each checkpoint's parent (the node that "wrote" the checkpoint). Decoding
a channel value is never needed to draw the tree, so a page costs the same at 5,000
checkpoints as at 50.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint.queries import (
    select_subgraph_window,
    select_tree_page,
    select_write_tasks,
)
from app.db.access import read

MAX_TREE_PAGE = 1000
# a page shows at most this many subgraph checkpoints of its time window
MAX_SUBGRAPH_ROWS = 1000
# langgraph's task path of a node run in a super-step: "~__pregel_pull, <node>"
_PULL_PREFIX = "~__pregel_pull, "


@dataclass
class TreeNode:
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    step: int | None
    source: str | None
    created_at: datetime | None
    writers: list[str] = field(default_factory=list)


@dataclass
class TreePage:
    nodes: list[TreeNode]
    next_before: str | None  # the cursor of the next (older) page; None at the root


def _node_name(task_path: str) -> str | None:
    if task_path.startswith(_PULL_PREFIX):
        name = task_path[len(_PULL_PREFIX) :]
        return None if name.startswith("__") else name
    return None


async def tree_page(
    engine: AsyncEngine, *, tenant_id: str, thread_id: str, before: str | None, limit: int
) -> TreePage:
    """One page of the tree (the caller has checked the thread belongs to the tenant)."""
    limit = max(1, min(limit, MAX_TREE_PAGE))
    async with read(engine) as conn:
        root = (
            await conn.execute(
                select_tree_page(tenant_id, thread_id, before=before, limit=limit + 1)
            )
        ).all()
        more = len(root) > limit
        root = root[:limit]
        # subgraph checkpoints made while this page's root checkpoints were (same id window)
        since = root[-1].checkpoint_id if more and root else None
        nested = (
            await conn.execute(
                select_subgraph_window(
                    tenant_id, thread_id, since=since, before=before, limit=MAX_SUBGRAPH_ROWS
                )
            )
        ).all()
        rows = [*root, *nested]
        parents: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            if r.parent_checkpoint_id:
                parents[r.checkpoint_ns].add(r.parent_checkpoint_id)
        writers: dict[tuple[str, str], set[str]] = defaultdict(set)
        for ns, ids in sorted(parents.items()):
            stmt = select_write_tasks(tenant_id, thread_id, ns, sorted(ids))
            for w in await conn.execute(stmt):
                name = _node_name(w.task_path or "")
                if name is not None:
                    writers[(w.checkpoint_ns, w.checkpoint_id)].add(name)
    nodes = []
    for r in rows:
        meta = r.metadata if isinstance(r.metadata, dict) else {}
        source = meta.get("source")
        step = meta.get("step")
        # only a loop step was written by the tasks of its parent; an update or a fork
        # shares the parent with the branch it left
        names = writers.get((r.checkpoint_ns, r.parent_checkpoint_id or ""), set())
        nodes.append(
            TreeNode(
                checkpoint_ns=r.checkpoint_ns,
                checkpoint_id=r.checkpoint_id,
                parent_id=r.parent_checkpoint_id,
                step=step if isinstance(step, int) else None,
                source=source if isinstance(source, str) else None,
                created_at=r.created_at,
                writers=sorted(names) if source == "loop" else [],
            )
        )
    return TreePage(nodes=nodes, next_before=root[-1].checkpoint_id if more else None)

"""Lay one page of checkpoint headers out as branches (lanes) per namespace.

Walking a namespace oldest to newest, a checkpoint continues its parent's lane when it is
the parent's first child; a later child of the same parent (a fork, an update, a replay)
opens a new lane. Rows are then listed newest first, which is how people read history.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.checkpoint.tree import TreeNode


@dataclass
class TreeRow:
    node: TreeNode
    lane: int
    fork: bool  # opens a new branch off its parent
    newest: bool  # the head of the thread (latest checkpoint of the root namespace)


@dataclass
class Namespace:
    name: str  # "" is the thread's own graph; others are subgraph namespaces
    rows: list[TreeRow]
    lanes: int


def layout(nodes: list[TreeNode], *, head_id: str | None) -> list[Namespace]:
    by_ns: dict[str, list[TreeNode]] = {}
    for node in nodes:
        by_ns.setdefault(node.checkpoint_ns, []).append(node)
    out: list[Namespace] = []
    for name in sorted(by_ns):
        ordered = sorted(by_ns[name], key=lambda n: n.checkpoint_id)
        lane_of: dict[str, int] = {}
        continued: set[str] = set()
        rows: list[TreeRow] = []
        lanes = 0
        for node in ordered:
            parent = node.parent_id
            if parent is not None and parent in lane_of and parent not in continued:
                lane, fork = lane_of[parent], False
                continued.add(parent)
            elif parent is not None and parent in lane_of:
                lane, fork = lanes, True
                lanes += 1
            else:
                # the parent is on an older page (or this is the root): keep lane 0 going
                lane, fork = (0, False) if lanes == 0 else (lanes, False)
                lanes = max(lanes, lane + 1)
            lanes = max(lanes, lane + 1)
            lane_of[node.checkpoint_id] = lane
            newest = name == "" and node.checkpoint_id == head_id
            rows.append(TreeRow(node=node, lane=lane, fork=fork, newest=newest))
        rows.reverse()
        out.append(Namespace(name=name, rows=rows, lanes=lanes))
    return out

"""Business rules that hold wherever a change comes from (HTTP, MCP, CLI, a connector's record).

Pure: they look at records already read and raise a typed error; no I/O.
"""

from __future__ import annotations

from core.errors import Conflict
from schemas.domain import KbStatus, KnowledgeBase


def ensure_changeable(kb: KnowledgeBase, hint: str = "") -> KnowledgeBase:
    """A KB being deleted takes no more changes: no edits, no new documents (409).

    `hint` tells the caller what it can do instead.
    """
    if kb.status is KbStatus.DELETING:
        raise Conflict(f"knowledge base {kb.id!r} is being deleted{hint}")
    return kb


def goes_live(version: int, live_version: int | None) -> bool:
    """Whether a version of a source that has just finished indexing becomes its live one: yes,
    unless a newer version is live already (versions may finish out of order: a newer upload's
    pipeline can overtake an older one's). The older versions then leave search."""
    return live_version is None or version >= live_version

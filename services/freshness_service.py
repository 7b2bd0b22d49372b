"""What keeps cached search answers current, in one place.

Two kinds of cached state can go out of date:
- answers, keyed by the revision of every KB they searched: every write that changes what a KB
  holds or shows raises the KB's revision in MongoDB, and the writer tells this component the
  new revision, which raises the cached copy (only ever upwards, so two writers cannot move it
  back) and so retires every answer cached for an older one;
- bots' resolved access (their settings and attached, active KBs): dropped when the bot changes
  or when one of its KBs is enabled, disabled or deleted.

Writers (the KB, bot and document services, the intake and the index stage) call it; the access
guard and the search service read through it. Only `infra.search_cache` talks to Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.bot_repository import BotRepository
from infra.knowledge_base_repository import KnowledgeBaseRepository
from infra.search_cache import SearchCache
from schemas.domain import KnowledgeBase


class FreshnessService:
    """Owns KB revisions as the answer cache sees them and bots' cached access."""

    def __init__(
        self, cache: SearchCache, kbs: KnowledgeBaseRepository, bots: BotRepository
    ) -> None:
        self._cache = cache
        self._kbs = kbs
        self._bots = bots

    # --- told by writers --------------------------------------------------------------------

    async def kbs_changed(self, revisions: Mapping[str, int]) -> None:
        """These KBs now have these revisions: answers cached for older ones are out of date."""
        for kb_id, revision in revisions.items():
            await self._cache.kb_changed(kb_id, revision)

    async def kb_changed(self, kb: KnowledgeBase, *, access: bool = False) -> None:
        """A KB was edited; with `access`, enabled, disabled or deleted, so every bot it is
        attached to resolves its access again."""
        await self._cache.kb_changed(kb.id, kb.revision)
        if access:
            await self._cache.drop_access(await self._bots.attached_to(kb.id))

    async def bot_changed(self, bot_id: str) -> None:
        """A bot was edited or deleted: its cached access is out of date."""
        await self._cache.drop_access([bot_id])

    # --- read by the access guard and the search service ------------------------------------

    async def cached_access(self, bot_id: str) -> dict[str, Any] | None:
        """A bot's cached access, or None."""
        return await self._cache.get_access(bot_id)

    async def remember_access(self, bot_id: str, access: dict[str, Any]) -> None:
        """Caches a bot's resolved access (until it or one of its KBs changes, or expires)."""
        await self._cache.set_access(bot_id, access)

    async def revisions(self, kb_ids: list[str]) -> list[int] | None:
        """The current revision of each KB (-1 for one that does not exist), for an answer's
        cache key; None when the cache is unavailable (the answer is then not cached)."""
        cached = await self._cache.kb_revisions(kb_ids)
        if cached is None:
            return None
        missing = [
            kb_id for kb_id, revision in zip(kb_ids, cached, strict=True) if revision is None
        ]
        if not missing:
            return [revision for revision in cached if revision is not None]
        known = await self._kbs.revisions(missing)
        await self.kbs_changed(known)
        return [
            known.get(kb_id, -1) if revision is None else revision
            for kb_id, revision in zip(kb_ids, cached, strict=True)
        ]

"""The access guard: which KBs a bot's search may touch.

A bot may search the KBs attached to it that exist in its own tenant and are active, and of
those only the ones the request names (if it names any). Everything else is dropped without an
error; a bot whose knowledge is disabled searches nothing. The resolved access is held in the
process's memory until the bot or one of its KBs changes (`services.freshness_service`), for
`access_ttl_s` at most.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import NotFound
from infra.mongo.bot_repository import BotRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.bots import KnowledgeConfig
from services.freshness_service import FreshnessService, Kind


@dataclass(frozen=True)
class BotAccess:
    """A bot's settings and the KBs it may search now."""

    bot_id: str
    tenant_id: str
    revision: int
    knowledge: KnowledgeConfig
    active_kb_ids: tuple[str, ...]

    def allowed(self, requested: list[str] | None) -> list[str]:
        """The KBs a search may use: active and attached, narrowed to `requested`."""
        if not self.knowledge.enabled:
            return []
        if requested is None:
            return list(self.active_kb_ids)
        active = set(self.active_kb_ids)
        return [kb_id for kb_id in dict.fromkeys(requested) if kb_id in active]


class AccessGuard:
    """Resolves bots' access, through the cache."""

    def __init__(
        self, bots: BotRepository, kbs: KnowledgeBaseRepository, freshness: FreshnessService
    ) -> None:
        self._bots = bots
        self._kbs = kbs
        self._freshness = freshness

    async def for_bot(self, bot_id: str, since: int | None = None) -> tuple[BotAccess, bool]:
        """The bot's access and whether it was held in memory; `NotFound` for no such bot.
        `since`: the freshness epoch the search began with (None: now)."""
        since = self._freshness.epoch if since is None else since
        held = self._freshness.held(Kind.ACCESS, bot_id)
        if isinstance(held, BotAccess):
            return held, True
        bot = await self._bots.find(bot_id)
        if bot is None:
            raise NotFound("bot", bot_id)
        active = await self._kbs.active_ids(bot.tenant_id, bot.knowledge.kb_ids)
        access = BotAccess(bot.id, bot.tenant_id, bot.revision, bot.knowledge, tuple(active))
        self._freshness.hold(Kind.ACCESS, bot_id, access, since, bot.knowledge.kb_ids)
        return access, False

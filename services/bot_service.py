"""Bot administration: bots and their knowledge attachment."""

from __future__ import annotations

from core.errors import InvalidRequest
from infra.mongo.bot_repository import BotRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.bots import Bot, BotCreate, BotUpdate
from services.freshness_service import FreshnessService


class BotService:
    """The tenant's bots; a change reaches the bot's cached access at once."""

    def __init__(
        self, bots: BotRepository, kbs: KnowledgeBaseRepository, freshness: FreshnessService
    ) -> None:
        self._bots = bots
        self._kbs = kbs
        self._freshness = freshness

    async def create(self, tenant_id: str, body: BotCreate) -> Bot:
        """Creates a bot; its KBs must be the tenant's own."""
        await self._check_kbs(tenant_id, body.knowledge.kb_ids)
        return await self._bots.create(tenant_id, body)

    async def list_all(self, tenant_id: str) -> list[Bot]:
        """The tenant's bots, newest first."""
        return await self._bots.list_all(tenant_id)

    async def get(self, tenant_id: str, bot_id: str) -> Bot:
        """One of the tenant's bots (`NotFound` for any other)."""
        return await self._bots.get(tenant_id, bot_id)

    async def update(self, tenant_id: str, bot_id: str, body: BotUpdate) -> Bot:
        """Changes the name or the knowledge attachment (only the fields given)."""
        if body.knowledge is not None and body.knowledge.kb_ids is not None:
            await self._check_kbs(tenant_id, body.knowledge.kb_ids)
        bot = await self._bots.update(tenant_id, bot_id, body)
        await self._freshness.bot_changed(bot_id)
        return bot

    async def delete(self, tenant_id: str, bot_id: str) -> None:
        """Deletes a bot; its searches are refused from now on."""
        await self._bots.delete(tenant_id, bot_id)
        await self._freshness.bot_changed(bot_id)

    async def _check_kbs(self, tenant_id: str, kb_ids: list[str]) -> None:
        """Attached KBs must be the tenant's own (disabled ones may be attached)."""
        known = {kb.id for kb in await self._kbs.list_all(tenant_id)}
        unknown = [kb_id for kb_id in kb_ids if kb_id not in known]
        if unknown:
            raise InvalidRequest(
                f"knowledge.kb_ids: unknown knowledge base(s): {', '.join(unknown)}"
            )

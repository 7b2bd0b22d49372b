"""Bots in MongoDB, scoped to a tenant; every change bumps the bot's `revision`."""

from __future__ import annotations

from pymongo import ReturnDocument

from core.errors import NotFound
from infra.mongo.client import BOTS, Database, from_mongo, mongo_errors
from schemas.bots import Bot, BotCreate, BotUpdate, KnowledgeConfig, new_bot_id
from schemas.domain import utcnow


class BotRepository:
    """Reads and writes bots."""

    def __init__(self, db: Database) -> None:
        self._bots = db[BOTS]

    async def create(self, tenant_id: str, body: BotCreate) -> Bot:
        """Stores a new bot."""
        now = utcnow()
        bot = Bot(
            id=new_bot_id(),
            tenant_id=tenant_id,
            name=body.name.strip(),
            knowledge=body.knowledge,
            created_at=now,
            updated_at=now,
        )
        record = bot.model_dump(exclude={"id"})
        record["_id"] = bot.id
        async with mongo_errors():
            await self._bots.insert_one(record)
        return bot

    async def list_all(self, tenant_id: str) -> list[Bot]:
        """The tenant's bots, newest first."""
        async with mongo_errors():
            cursor = self._bots.find({"tenant_id": tenant_id}).sort("created_at", -1)
            return [Bot.model_validate(from_mongo(doc)) async for doc in cursor]

    async def newest_ids(self, limit: int) -> list[str]:
        """The ids of up to `limit` bots of every tenant, the most recently created first."""
        async with mongo_errors():
            cursor = self._bots.find({}, {"_id": 1}).sort("created_at", -1).limit(limit)
            return [str(doc["_id"]) async for doc in cursor]

    async def get(self, tenant_id: str, bot_id: str) -> Bot:
        """One of the tenant's bots; `NotFound` for any other."""
        async with mongo_errors():
            doc = await self._bots.find_one({"_id": bot_id, "tenant_id": tenant_id})
        if doc is None:
            raise NotFound("bot", bot_id)
        return Bot.model_validate(from_mongo(doc))

    async def find(self, bot_id: str) -> Bot | None:
        """A bot by id, whatever its tenant (the search caller names only the bot)."""
        async with mongo_errors():
            doc = await self._bots.find_one({"_id": bot_id})
        return None if doc is None else Bot.model_validate(from_mongo(doc))

    async def update(self, tenant_id: str, bot_id: str, body: BotUpdate) -> Bot:
        """Applies the given changes; the knowledge attachment is validated as a whole."""
        current = await self.get(tenant_id, bot_id)
        changes: dict[str, object] = {}
        if body.name is not None:
            changes["name"] = body.name.strip()
        if body.knowledge is not None:
            merged = {
                **current.knowledge.model_dump(),
                **body.knowledge.model_dump(exclude_unset=True),
            }
            changes["knowledge"] = KnowledgeConfig.model_validate(merged).model_dump()
        async with mongo_errors():
            doc = await self._bots.find_one_and_update(
                {"_id": bot_id, "tenant_id": tenant_id},
                {"$set": {**changes, "updated_at": utcnow()}, "$inc": {"revision": 1}},
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise NotFound("bot", bot_id)
        return Bot.model_validate(from_mongo(doc))

    async def delete(self, tenant_id: str, bot_id: str) -> None:
        """Deletes a bot."""
        async with mongo_errors():
            result = await self._bots.delete_one({"_id": bot_id, "tenant_id": tenant_id})
        if result.deleted_count == 0:
            raise NotFound("bot", bot_id)

    async def attached_to(self, kb_id: str) -> list[str]:
        """Ids of the bots that have a KB attached."""
        async with mongo_errors():
            cursor = self._bots.find({"knowledge.kb_ids": kb_id}, projection={"_id": 1})
            return [doc["_id"] async for doc in cursor]

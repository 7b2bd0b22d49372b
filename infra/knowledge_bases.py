"""Knowledge-base records in MongoDB, always scoped to a tenant."""

from __future__ import annotations

from typing import Any

from pymongo import ReturnDocument

from core.errors import NotFound
from core.governance import Visibility
from infra.mongo import KNOWLEDGE_BASES, Database, from_mongo, mongo_errors
from schemas.domain import KbStatus, KnowledgeBase, new_kb_id, utcnow


class KnowledgeBaseRepository:
    """Reads and writes knowledge bases; every change bumps the KB's `revision` (the caller
    tells `services.freshness`)."""

    def __init__(self, db: Database) -> None:
        self._kbs = db[KNOWLEDGE_BASES]

    async def create(
        self,
        tenant_id: str,
        name: str,
        description: str,
        default_language: str,
        default_visibility: Visibility = Visibility.SHARED,
    ) -> KnowledgeBase:
        """Creates an active, empty knowledge base."""
        now = utcnow()
        kb = KnowledgeBase(
            id=new_kb_id(),
            tenant_id=tenant_id,
            name=name,
            description=description,
            default_language=default_language,
            default_visibility=default_visibility,
            created_at=now,
            updated_at=now,
        )
        record = kb.model_dump(exclude={"id"})
        record["_id"] = kb.id
        async with mongo_errors():
            await self._kbs.insert_one(record)
        return kb

    async def list_all(self, tenant_id: str) -> list[KnowledgeBase]:
        """The tenant's knowledge bases, newest first."""
        async with mongo_errors():
            cursor = self._kbs.find({"tenant_id": tenant_id}).sort("created_at", -1)
            return [KnowledgeBase.model_validate(from_mongo(doc)) async for doc in cursor]

    async def get(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        """One of the tenant's knowledge bases; `NotFound` for any other."""
        async with mongo_errors():
            doc = await self._kbs.find_one({"_id": kb_id, "tenant_id": tenant_id})
        if doc is None:
            raise NotFound("knowledge base", kb_id)
        return KnowledgeBase.model_validate(from_mongo(doc))

    async def update(self, tenant_id: str, kb_id: str, changes: dict[str, Any]) -> KnowledgeBase:
        """Applies the given field changes."""
        async with mongo_errors():
            doc = await self._kbs.find_one_and_update(
                {"_id": kb_id, "tenant_id": tenant_id},
                {"$set": {**changes, "updated_at": utcnow()}, "$inc": {"revision": 1}},
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise NotFound("knowledge base", kb_id)
        return KnowledgeBase.model_validate(from_mongo(doc))

    async def revisions(self, kb_ids: list[str]) -> dict[str, int]:
        """The current revision of each of these KBs that exists."""
        async with mongo_errors():
            cursor = self._kbs.find({"_id": {"$in": kb_ids}}, projection={"revision": 1})
            return {doc["_id"]: int(doc.get("revision", 0)) async for doc in cursor}

    async def all_active_ids(self, tenant_id: str) -> list[str]:
        """Every active KB of the tenant, oldest first."""
        async with mongo_errors():
            cursor = self._kbs.find(
                {"tenant_id": tenant_id, "status": KbStatus.ACTIVE}, projection={"_id": 1}
            ).sort("created_at", 1)
            return [doc["_id"] async for doc in cursor]

    async def active_ids(self, tenant_id: str, kb_ids: list[str]) -> list[str]:
        """Those of `kb_ids` that exist for the tenant and are active, in the order given."""
        if not kb_ids:
            return []
        async with mongo_errors():
            cursor = self._kbs.find(
                {"_id": {"$in": kb_ids}, "tenant_id": tenant_id, "status": KbStatus.ACTIVE},
                projection={"_id": 1},
            )
            found = {doc["_id"] async for doc in cursor}
        return [kb_id for kb_id in dict.fromkeys(kb_ids) if kb_id in found]

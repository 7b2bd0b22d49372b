"""Knowledge-base records in MongoDB, always scoped to a tenant."""

from __future__ import annotations

from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from core.errors import Conflict, NotFound
from core.governance import Visibility
from infra.mongo.client import (
    DOCUMENTS,
    KB_CODES,
    KNOWLEDGE_BASES,
    Database,
    from_mongo,
    mongo_errors,
)
from schemas.domain import KbStatus, KnowledgeBase, RetrievalConfig, new_kb_id, utcnow


class KnowledgeBaseRepository:
    """Reads and writes knowledge bases; every change bumps the KB's `revision` (the caller
    tells `services.freshness_service`)."""

    def __init__(self, db: Database) -> None:
        self._kbs = db[KNOWLEDGE_BASES]
        self._codes = db[KB_CODES]
        self._docs = db[DOCUMENTS]

    async def create(
        self,
        tenant_id: str,
        name: str,
        description: str,
        default_language: str,
        default_visibility: Visibility = Visibility.SHARED,
        *,
        code: str | None = None,
        urls: list[str] | None = None,
        files: list[str] | None = None,
    ) -> KnowledgeBase:
        """Creates an active, empty knowledge base (`Conflict` if its code is taken)."""
        now = utcnow()
        kb = KnowledgeBase(
            id=new_kb_id(),
            tenant_id=tenant_id,
            name=name,
            description=description,
            default_language=default_language,
            default_visibility=default_visibility,
            code=code,
            urls=urls or [],
            files=files or [],
            created_at=now,
            updated_at=now,
        )
        # Its counts are its documents' (`counted`), never stored.
        record = kb.model_dump(exclude={"id", "document_count", "chunk_count"})
        record["_id"] = kb.id
        if code is not None:
            await self._claim_code(tenant_id, code, kb.id)
        try:
            async with mongo_errors():
                await self._kbs.insert_one(record)
        except BaseException:
            if code is not None:
                await self.release_code(tenant_id, code)
            raise
        return kb

    async def _claim_code(self, tenant_id: str, code: str, kb_id: str) -> None:
        try:
            async with mongo_errors():
                await self._codes.insert_one({"_id": f"{tenant_id}:{code}", "kb_id": kb_id})
        except DuplicateKeyError as exc:
            raise Conflict(f"the code {code!r} is taken by another knowledge base") from exc

    async def release_code(self, tenant_id: str, code: str) -> None:
        """Frees a KB code (its KB is gone or has another one now)."""
        async with mongo_errors():
            await self._codes.delete_one({"_id": f"{tenant_id}:{code}"})

    async def resolve(self, tenant_id: str, id_or_code: str) -> str:
        """The id of the tenant's KB with this id or code (`NotFound` for neither)."""
        if id_or_code.startswith("kb_"):
            return id_or_code
        async with mongo_errors():
            doc = await self._kbs.find_one(
                {"tenant_id": tenant_id, "code": id_or_code}, projection={"_id": 1}
            )
        if doc is None:
            raise NotFound("knowledge base", id_or_code)
        return str(doc["_id"])

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
        """Applies the given field changes (a new code is claimed first, the old released)."""
        new_code = changes.get("code")
        previous = None
        if new_code is not None:
            previous = await self.get(tenant_id, kb_id)
            if previous.code == new_code:
                new_code = None
            else:
                await self._claim_code(tenant_id, new_code, kb_id)
        try:
            kb = await self._apply(tenant_id, kb_id, changes)
        except BaseException:
            if new_code is not None:
                await self.release_code(tenant_id, new_code)
            raise
        if new_code is not None and previous is not None and previous.code:
            await self.release_code(tenant_id, previous.code)
        return kb

    async def _apply(self, tenant_id: str, kb_id: str, changes: dict[str, Any]) -> KnowledgeBase:
        async with mongo_errors():
            doc = await self._kbs.find_one_and_update(
                {"_id": kb_id, "tenant_id": tenant_id},
                {"$set": {**changes, "updated_at": utcnow()}, "$inc": {"revision": 1}},
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise NotFound("knowledge base", kb_id)
        return KnowledgeBase.model_validate(from_mongo(doc))

    async def counted(self, kbs: list[KnowledgeBase]) -> list[KnowledgeBase]:
        """The KBs with their counts: how many documents each holds and how many of their
        chunks are searchable, counted from the documents (one aggregation). Counts are not
        kept on a KB: a change to a document would then write its KB's record in the change's
        transaction, and a process killed inside one would hold up every other document of the
        KB until the server reaps it (`infra.mongo.lifecycle`)."""
        if not kbs:
            return []
        pipeline: list[dict[str, Any]] = [
            {"$match": {"kb_id": {"$in": [kb.id for kb in kbs]}}},
            {
                "$group": {
                    "_id": "$kb_id",
                    "documents": {"$sum": 1},
                    "chunks": {"$sum": {"$ifNull": ["$indexed_chunk_count", 0]}},
                }
            },
        ]
        async with mongo_errors():
            cursor = await self._docs.aggregate(pipeline)
            counts = {doc["_id"]: doc async for doc in cursor}
        return [
            kb.model_copy(
                update={
                    "document_count": int(counts.get(kb.id, {}).get("documents", 0)),
                    "chunk_count": int(counts.get(kb.id, {}).get("chunks", 0)),
                }
            )
            for kb in kbs
        ]

    async def revisions(self, kb_ids: list[str]) -> dict[str, int]:
        """The current revision of each of these KBs that exists."""
        async with mongo_errors():
            cursor = self._kbs.find({"_id": {"$in": kb_ids}}, projection={"revision": 1})
            return {doc["_id"]: int(doc.get("revision", 0)) async for doc in cursor}

    async def default_retrievals(
        self, tenant_id: str, kb_ids: list[str]
    ) -> list[RetrievalConfig | None]:
        """Each of these KBs' default retrieval, in order (None: none set, or not the
        tenant's)."""
        if not kb_ids:
            return []
        async with mongo_errors():
            cursor = self._kbs.find(
                {"_id": {"$in": kb_ids}, "tenant_id": tenant_id},
                projection={"default_retrieval": 1},
            )
            found = {doc["_id"]: doc.get("default_retrieval") async for doc in cursor}
        return [
            None if found.get(kb_id) is None else RetrievalConfig.model_validate(found[kb_id])
            for kb_id in kb_ids
        ]

    async def ids_of(self, tenant_id: str, refs: list[str]) -> list[str]:
        """The ids of the KBs these ids or codes name, in order (an unknown code is dropped)."""
        codes = [ref for ref in refs if not ref.startswith("kb_")]
        found: dict[str, str] = {}
        if codes:
            async with mongo_errors():
                cursor = self._kbs.find(
                    {"tenant_id": tenant_id, "code": {"$in": codes}}, projection={"code": 1}
                )
                found = {doc["code"]: str(doc["_id"]) async for doc in cursor}
        return [
            ref if ref.startswith("kb_") else found[ref]
            for ref in refs
            if ref in found or ref.startswith("kb_")
        ]

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

"""Knowledge-base administration: create, read, edit, enable/disable, delete."""

from __future__ import annotations

from typing import Any

from core.governance import Visibility
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.domain import KbStatus, KnowledgeBase
from schemas.rules import ensure_changeable
from services.freshness_service import FreshnessService
from services.removal_service import RemovalService


class KnowledgeBaseService:
    """The tenant's knowledge bases; every change reaches cached search answers and access."""

    def __init__(
        self, kbs: KnowledgeBaseRepository, removal: RemovalService, freshness: FreshnessService
    ) -> None:
        self._kbs = kbs
        self._removal = removal
        self._freshness = freshness

    async def create(
        self,
        tenant_id: str,
        name: str,
        description: str = "",
        default_language: str = "en",
        default_visibility: Visibility = Visibility.SHARED,
        *,
        code: str | None = None,
        urls: list[str] | None = None,
        files: list[str] | None = None,
    ) -> KnowledgeBase:
        """Creates an active, empty knowledge base (409 if its code is taken)."""
        kb = await self._kbs.create(
            tenant_id,
            name,
            description,
            default_language,
            default_visibility,
            code=code,
            urls=urls,
            files=files,
        )
        # People's searches of the tenant search it from now on.
        await self._freshness.kb_changed(kb, access=True)
        return kb

    async def resolve(self, tenant_id: str, id_or_code: str) -> str:
        """The id of the tenant's KB named by its id or its code."""
        return await self._kbs.resolve(tenant_id, id_or_code)

    async def list_all(self, tenant_id: str) -> list[KnowledgeBase]:
        """The tenant's knowledge bases, newest first, with their counts."""
        return await self._kbs.counted(await self._kbs.list_all(tenant_id))

    async def get(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        """One of the tenant's knowledge bases with its counts (`NotFound` for any other)."""
        return await self._counted(await self._kbs.get(tenant_id, kb_id))

    async def update(self, tenant_id: str, kb_id: str, changes: dict[str, Any]) -> KnowledgeBase:
        """Applies the given field changes (none: the KB as it is); 409 while it is deleted."""
        current = ensure_changeable(await self._kbs.get(tenant_id, kb_id))
        if not changes:
            return await self._counted(current)
        kb = await self._kbs.update(tenant_id, kb_id, changes)
        await self._freshness.kb_changed(kb, access="status" in changes)
        return await self._counted(kb)

    async def disable(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        """Takes the KB's chunks out of search at once; nothing is lost."""
        ensure_changeable(await self._kbs.get(tenant_id, kb_id), "; delete it with hard=true")
        kb = await self._kbs.update(tenant_id, kb_id, {"status": KbStatus.DISABLED})
        await self._freshness.kb_changed(kb, access=True)
        return await self._counted(kb)

    async def _counted(self, kb: KnowledgeBase) -> KnowledgeBase:
        (counted,) = await self._kbs.counted([kb])
        return counted

    async def delete(self, tenant_id: str, kb_id: str) -> None:
        """Deletes the KB and everything in it, for good (an interrupted delete is finished by
        deleting again)."""
        await self._removal.delete_kb(tenant_id, kb_id)

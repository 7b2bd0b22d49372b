"""Item governance: who may change an item's ownership and visibility, and the change itself
(who a caller is as a reader, and who owns what they add, is `services.policy_service`).

The rule itself (which principals read an item) is `core.governance`; this module applies it
with what is stored: audience memberships, the tenant's users and audiences (a grant or an
audience that does not exist is refused, naming it), the KB's default visibility, and the
previous version of a source (a new version keeps its permissions unless told otherwise).
Changing an item's governance rewrites the readers of its chunks in the vector store (no
re-embedding) and raises its KB's revision, so no cached answer shows the old permission.
"""

from __future__ import annotations

from core.errors import Forbidden
from core.filters import Filter, Match, MatchAny
from core.governance import Governance, GovernanceChange
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.vectorstore.base import VectorStore
from schemas.domain import Document, Principal, utcnow
from schemas.rules import ensure_changeable
from services.freshness_service import FreshnessService
from services.policy_service import PolicyService


def chunks_of_item(tenant_id: str, document_ids: list[str]) -> Filter:
    """Every chunk of the given versions of an item."""
    return Filter(
        must=(Match("tenant_id", tenant_id), MatchAny("document_id", tuple(document_ids)))
    )


class GovernanceService:
    """Changes who owns and who may read an item, everywhere at once."""

    def __init__(
        self,
        policy: PolicyService,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        store: VectorStore,
        freshness: FreshnessService,
    ) -> None:
        self._policy = policy
        self._documents = documents
        self._kbs = kbs
        self._store = store
        self._freshness = freshness

    async def change(
        self, principal: Principal, kb_id: str, document_id: str, change: GovernanceChange
    ) -> Document:
        """Applies the change to every version of the document's item; search sees it as soon
        as this returns."""
        reader = await self._policy.reader(principal)
        tenant_id = principal.tenant_id
        document = await self._documents.get(tenant_id, kb_id, document_id)
        self._policy.manageable(reader, document)
        ensure_changeable(await self._kbs.get(tenant_id, kb_id))
        if not reader.admin and change.owner_user_id not in (None, reader.user_id):
            raise Forbidden("only an admin can give an item to another user")
        governance = change.apply(document.governance, utcnow())
        await self._policy.check_exists(tenant_id, governance)
        await self.apply(document, governance)
        return await self._documents.get(tenant_id, kb_id, document_id)

    async def apply(self, document: Document, governance: Governance) -> None:
        """Stores the governance on the item's versions and their chunks; retires cached
        answers of the KB."""
        tenant_id = document.tenant_id
        await self._documents.set_governance(tenant_id, document.knowledge_item_id, governance)
        versions = await self._documents.versions_of_item(tenant_id, document.knowledge_item_id)
        ids = sorted({document.id, *(v.id for v in versions)})
        await self._store.set_readers(chunks_of_item(tenant_id, ids), governance.readers())
        kb = await self._kbs.update(tenant_id, document.kb_id, {})
        await self._freshness.kb_changed(kb)

    async def backfill(self, batch: int = 500) -> int:
        """Gives documents stored before items had governance the default one (shared, as
        they were readable before) and their chunks its readers; returns how many."""
        done = 0
        while True:
            pending = await self._documents.without_readers(batch)
            if not pending:
                return done
            for document in pending:
                await self.apply(document, document.governance)
            done += len(pending)

"""Reading a knowledge base's documents: pages with their pipeline status, one document, and
the chunks the vector store holds for it."""

from __future__ import annotations

from datetime import datetime, timedelta

from infra.documents import DocumentPage, DocumentRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.vectorstore.base import VectorStore
from schemas.chunks import ChunkPayload
from schemas.domain import Document, ParseStatus, utcnow


class DocumentQueries:
    """What an admin sees of documents."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        store: VectorStore,
        stall_after_s: float,
    ) -> None:
        self._documents = documents
        self._kbs = kbs
        self._store = store
        self._stall_after = timedelta(seconds=stall_after_s)

    def stalled_before(self) -> datetime:
        """Documents in progress that have not moved since this moment are stalled."""
        return utcnow() - self._stall_after

    async def list_page(
        self,
        tenant_id: str,
        kb_id: str,
        *,
        status: ParseStatus | None = None,
        stalled: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> DocumentPage:
        """The KB's documents, newest first, a page at a time (`NotFound` for no such KB);
        `stalled` keeps only documents in progress that stopped moving."""
        await self._kbs.get(tenant_id, kb_id)
        return await self._documents.list_page(
            tenant_id,
            kb_id,
            status=status,
            stalled_before=self.stalled_before() if stalled else None,
            limit=limit,
            cursor=cursor,
        )

    async def get(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """One document with its pipeline status."""
        return await self._documents.get(tenant_id, kb_id, document_id)

    async def chunks(
        self, tenant_id: str, kb_id: str, document_id: str, limit: int
    ) -> list[ChunkPayload]:
        """The document's chunks as the vector store holds them (what search can return)."""
        await self._documents.get(tenant_id, kb_id, document_id)
        return await self._store.document_chunks(tenant_id, document_id, limit)

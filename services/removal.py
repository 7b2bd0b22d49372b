"""Deleting documents and knowledge bases: out of search first, then files and records.

A delete retires the document's generation first, so nothing in flight can bring its chunks
back, then removes its chunks, files and record.
"""

from __future__ import annotations

from core.filters import chunks_of_document, chunks_of_kb
from core.governance import Reader
from infra.blob_store import BlobStore
from infra.documents import DocumentRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.lifecycle import DocumentLifecycle
from infra.vectorstore.base import VectorStore
from schemas.domain import Document, KbStatus
from services.freshness import SearchFreshness
from services.governance import ItemPolicy


class Removal:
    """Deletes documents and knowledge bases: out of search first, then files and records."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        lifecycle: DocumentLifecycle,
        blobs: BlobStore,
        store: VectorStore,
        freshness: SearchFreshness,
    ) -> None:
        self._documents = documents
        self._kbs = kbs
        self._lifecycle = lifecycle
        self._blobs = blobs
        self._store = store
        self._freshness = freshness

    async def delete_document(
        self, tenant_id: str, kb_id: str, document_id: str, reader: Reader
    ) -> None:
        """Removes the document from search at once, then its stored files and record (its
        owner or an admin only)."""
        ItemPolicy.manageable(reader, await self._documents.get(tenant_id, kb_id, document_id))
        document = await self._documents.begin_delete(tenant_id, kb_id, document_id)
        await self._store.delete(chunks_of_document(tenant_id, document_id))
        await self._delete_files(document)
        removed = await self._lifecycle.remove(document_id)
        if removed is not None:
            await self._freshness.kbs_changed(removed.revisions)

    async def delete_kb(self, tenant_id: str, kb_id: str) -> None:
        """Removes a KB and everything in it: hidden at once, then points, files, records.

        An interrupted delete leaves the KB in status `deleting`; deleting again finishes it.
        """
        kb = await self._kbs.update(tenant_id, kb_id, {"status": KbStatus.DELETING})
        await self._freshness.kb_changed(kb, access=True)
        documents = await self._documents.begin_delete_kb(tenant_id, kb_id)
        await self._store.delete(chunks_of_kb(tenant_id, kb_id))
        for document in documents:
            await self._delete_files(document)
        await self._lifecycle.remove_kb(kb_id)
        if kb.code:
            await self._kbs.release_code(tenant_id, kb.code)

    async def _delete_files(self, document: Document) -> None:
        await self._blobs.delete(document.storage_key)
        await self._blobs.delete_extracted(document.id)

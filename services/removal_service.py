"""Deleting documents and knowledge bases: out of search first, then files and records.

A delete retires the document's generation first, so nothing in flight can bring its chunks
back, then removes its chunks, files and record. A process without the vector store (the
records worker closing a sync) only retires documents; the API process, which holds the store,
sweeps retired documents every second and finishes their deletes, as it finishes a delete that
was interrupted. The same sweep takes out of search the runs the reconciler failed (it runs
where the store may not be reachable).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from core.filters import chunks_of_document, chunks_of_kb
from core.governance import Reader
from infra.mongo.blob_store import BlobStore
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.vectorstore.base import VectorStore, WithdrawnDocument
from schemas.domain import Document, KbStatus, ParseStatus, utcnow
from services.freshness_service import FreshnessService
from services.policy_service import PolicyService

log = logging.getLogger(__name__)

# A retired document is swept once it has been retired this long (a delete running in a
# request finishes it itself meanwhile).
SWEEP_GRACE = timedelta(seconds=1)


async def retire_document(
    documents: DocumentRepository, tenant_id: str, kb_id: str, document_id: str, reader: Reader
) -> None:
    """Takes a document out of the pipeline and out of lists at once (its owner or an admin);
    the API process's sweep removes its chunks, files and record."""
    PolicyService.manageable(reader, await documents.get(tenant_id, kb_id, document_id))
    await documents.begin_delete(tenant_id, kb_id, document_id)


class RemovalService:
    """Deletes documents and knowledge bases: out of search first, then files and records."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        lifecycle: DocumentLifecycle,
        blobs: BlobStore,
        store: VectorStore,
        freshness: FreshnessService,
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
        PolicyService.manageable(reader, await self._documents.get(tenant_id, kb_id, document_id))
        document = await self._documents.begin_delete(tenant_id, kb_id, document_id)
        await self._store.delete(chunks_of_document(tenant_id, document_id))
        await self._delete_files(document)
        removed = await self._lifecycle.remove(document_id)
        if removed is not None:
            await self._freshness.kbs_changed(removed.revisions)

    async def sweep(self, limit: int = 100) -> int:
        """Finishes the deletes of documents retired a while ago; returns how many."""
        finished = 0
        for document in await self._documents.retired(utcnow() - SWEEP_GRACE, limit):
            await self._store.delete(chunks_of_document(document.tenant_id, document.id))
            await self._delete_files(document)
            removed = await self._lifecycle.remove(document.id)
            if removed is not None:
                await self._freshness.kbs_changed(removed.revisions)
                finished += 1
        return finished

    async def withdraw_failed_runs(self, limit: int = 100) -> int:
        """Takes out of search the runs the reconciler failed (its process cannot reach the
        vector store), as the index stage does for a run failing there: the run's points go,
        the live older version of its source is shown again, its chunks leave the KB's count,
        and cached answers are retired. Returns how many runs were withdrawn."""
        withdrawn = 0
        for document, generation in await self._documents.runs_to_withdraw(limit):
            if document.generation == generation and document.parse_status is ParseStatus.FAILED:
                live = await self._lifecycle.live_version(document.kb_id, document.source_key)
                await self._store.withdraw_document(WithdrawnDocument.run_of(document, live))
                revisions = await self._lifecycle.withdraw(document.id, generation)
                if revisions:
                    await self._freshness.kbs_changed(revisions)
                withdrawn += 1
                log.warning(
                    "document %s (version %d): the run the reconciler failed was taken out of "
                    "search", document.id, document.version,
                )  # fmt: skip
            await self._documents.withdrawn(document.id, generation)
        return withdrawn

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

"""Document uploads and deletes: storage, records, events and the vector store, in order."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from api.uploads import ReceivedUpload, receive_upload
from infra.blob_store import BlobStore, StoredUpload
from infra.documents import DocumentRepository
from infra.errors import RetryableError, UnsupportedDocumentType
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.metrics import UPLOADS
from infra.settings import IngestSettings
from infra.vectorstore.base import VectorStore
from schemas.domain import Document, ParseStatus, new_document_id, utcnow
from schemas.events import DocumentUploaded, Event
from schemas.formats import CONTENT_TYPES, SUPPORTED_EXTENSIONS, extension_of

log = logging.getLogger(__name__)

Publish = Callable[[Sequence[Event]], Awaitable[None]]


def check_supported(filename: str) -> None:
    """Raises `UnsupportedDocumentType` for a file Ragline cannot extract."""
    extension = extension_of(filename)
    if extension not in CONTENT_TYPES:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)


class QueueUnavailable(RetryableError):
    """The document is stored but its event could not be published."""


class DocumentService:
    """What the document endpoints do."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        blobs: BlobStore,
        store: VectorStore,
        publish: Publish,
        ingest: IngestSettings,
    ) -> None:
        self._documents = documents
        self._kbs = kbs
        self._blobs = blobs
        self._store = store
        self._publish = publish
        self._ingest = ingest

    async def upload(
        self,
        tenant_id: str,
        kb_id: str,
        content_type: str | None,
        content_length: str | None,
        body: AsyncIterator[bytes],
    ) -> Document:
        """Stores an uploaded file, records a queued document and starts the pipeline."""
        await self._kbs.get(tenant_id, kb_id)
        document_id = new_document_id()

        async def discard(stored: StoredUpload) -> None:
            await self._blobs.delete(stored.storage_key)

        try:
            received = await receive_upload(
                content_type,
                content_length,
                body,
                file_field="file",
                max_bytes=self._ingest.max_upload_bytes,
                check_filename=check_supported,
                open_sink=lambda filename: self._blobs.start_original(filename, document_id),
                discard=discard,
            )
        except Exception:
            UPLOADS.labels("rejected").inc()
            raise
        document = await self._record(tenant_id, kb_id, document_id, received)
        UPLOADS.labels("accepted").inc()
        return document

    async def _record(
        self, tenant_id: str, kb_id: str, document_id: str, received: ReceivedUpload
    ) -> Document:
        now = utcnow()
        title = received.fields.get("title", "").strip() or received.filename
        document = Document(
            id=document_id,
            tenant_id=tenant_id,
            kb_id=kb_id,
            filename=received.filename,
            title=title[:500],
            content_type=CONTENT_TYPES[extension_of(received.filename)],
            size_bytes=received.stored.size_bytes,
            sha256=received.stored.sha256,
            storage_key=received.stored.storage_key,
            parse_status=ParseStatus.QUEUED,
            stage_started_at={ParseStatus.QUEUED.value: now},
            created_at=now,
            updated_at=now,
        )
        try:
            await self._documents.insert(document)
        except Exception:
            await self._blobs.delete(received.stored.storage_key)
            raise
        await self._kbs.add_counts(kb_id, documents=1)
        await self._start_pipeline(document)
        return document

    async def _start_pipeline(self, document: Document) -> None:
        event = DocumentUploaded(
            tenant_id=document.tenant_id,
            kb_id=document.kb_id,
            document_id=document.id,
            generation=document.generation,
            storage_key=document.storage_key,
            filename=document.filename,
            content_type=document.content_type,
        )
        try:
            await self._publish([event])
        except RetryableError as exc:
            await self._documents.mark_failed(
                document.id,
                document.generation,
                "the ingestion queue was unavailable; re-upload the file or re-index it",
            )
            raise QueueUnavailable(str(exc)) from exc

    async def delete(self, tenant_id: str, kb_id: str, document_id: str) -> None:
        """Removes the document from search at once, then its stored files and record."""
        document = await self._documents.begin_delete(tenant_id, kb_id, document_id)
        await self._store.delete_document(tenant_id, document_id)
        await self._blobs.delete(document.storage_key)
        await self._blobs.delete_extracted(document_id)
        if await self._documents.remove(document_id):
            await self._kbs.add_counts(kb_id, documents=-1, chunks=-document.indexed_chunk_count)

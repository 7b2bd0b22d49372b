"""The way documents come in: `Intake`, shared by the HTTP API and the records worker.

Every way a document comes in (an uploaded file, a text, a connector's record) ends here:
identical content is recognised and not processed twice, a new version of a source (same file
name or external id) is created next to the old one and replaces it when it is indexed, and
the pipeline is started by publishing `DocumentUploaded`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from core.errors import RetryableError
from core.rules import ensure_changeable
from infra.blob_store import BlobStore, OriginalUpload, StoredUpload
from infra.documents import DocumentRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.lifecycle import DocumentLifecycle
from schemas.domain import (
    Document,
    KnowledgeBase,
    ParseStatus,
    Record,
    file_source_key,
    new_document_id,
    record_source_key,
    utcnow,
)
from schemas.events import DocumentUploaded, Publish
from schemas.formats import CONTENT_TYPES, extension_of, extraction_name
from services.freshness import SearchFreshness

log = logging.getLogger(__name__)

# Records of one batch stored at once.
RECORD_CONCURRENCY = 16


class Outcome(StrEnum):
    """What an ingest call did."""

    CREATED = "created"
    UPDATED = "updated"  # a new version of an existing source
    UNCHANGED = "unchanged"  # identical content: the existing document is returned
    REINDEXED = "reindexed"


@dataclass
class Ingested:
    """A document and what ingesting it did."""

    document: Document
    outcome: Outcome


class QueueUnavailable(RetryableError):
    """The document is stored but its event could not be published."""


class Intake:
    """Creates documents, new versions of them, and re-runs the pipeline on them."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        lifecycle: DocumentLifecycle,
        blobs: BlobStore,
        publish: Publish,
        freshness: SearchFreshness,
        max_upload_bytes: int = 20 * 1024 * 1024,
    ) -> None:
        # Larger uploads are refused (413) while they stream in.
        self.max_upload_bytes = max_upload_bytes
        self._documents = documents
        self._kbs = kbs
        self._lifecycle = lifecycle
        self._blobs = blobs
        self._publish = publish
        self._freshness = freshness

    async def writable_kb(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        """The KB, if documents may be added to it (it exists and is not being deleted)."""
        return ensure_changeable(await self._kbs.get(tenant_id, kb_id))

    def open_original(self, filename: str, document_id: str) -> OriginalUpload:
        """Where an upload's bytes are streamed to, under the new document's id."""
        return self._blobs.start_original(filename, document_id)

    async def discard(self, stored: StoredUpload) -> None:
        """Deletes an upload's stored bytes (the upload was refused)."""
        await self._blobs.delete(stored.storage_key)

    async def accept_file(
        self,
        tenant_id: str,
        kb_id: str,
        document_id: str,
        filename: str,
        stored: StoredUpload,
        *,
        title: str | None = None,
        reindex: bool = False,
    ) -> Ingested:
        """Takes an uploaded file whose bytes are already stored under `document_id`."""
        identical = await self._documents.find_identical(kb_id, stored.sha256)
        if identical is not None:
            await self._blobs.delete(stored.storage_key)
            if not reindex:
                return Ingested(identical, Outcome.UNCHANGED)
            return Ingested(await self.reindex(tenant_id, kb_id, identical.id), Outcome.REINDEXED)
        source_key = file_source_key(filename)
        previous = await self._documents.latest_of_source(kb_id, source_key)
        document = await self._create(
            document_id=document_id,
            tenant_id=tenant_id,
            kb_id=kb_id,
            filename=filename,
            title=title or filename,
            content_type=CONTENT_TYPES[extension_of(filename)],
            stored=stored,
            source_key=source_key,
        )
        return Ingested(document, Outcome.UPDATED if previous else Outcome.CREATED)

    async def accept_record(self, tenant_id: str, kb_id: str, record: Record) -> Ingested:
        """Upserts one text record (see `accept_records`)."""
        return (await self.accept_records(tenant_id, kb_id, [record]))[0]

    async def accept_records(
        self, tenant_id: str, kb_id: str, records: Sequence[Record]
    ) -> list[Ingested]:
        """Upserts text records: by external id if they have one, else by their content.

        Unchanged records cost nothing; a changed one becomes a new version that replaces the
        old one once indexed. New documents are created together in one transaction.
        """
        await self.writable_kb(tenant_id, kb_id)
        keys = [record_source_key(r.external_id) if r.external_id else None for r in records]
        latest = await self._documents.latest_of_sources(kb_id, [k for k in keys if k])
        results: list[Ingested | None] = [None] * len(records)
        fresh: list[int] = []
        for position, (record, key) in enumerate(zip(records, keys, strict=True)):
            fingerprint = record.fingerprint()
            previous = (
                latest.get(key) if key else await self._documents.find_identical(kb_id, fingerprint)
            )
            if previous is None or previous.sha256 != fingerprint:
                fresh.append(position)
            elif previous.parse_status is ParseStatus.FAILED:
                document = await self.reindex(tenant_id, kb_id, previous.id)
                results[position] = Ingested(document, Outcome.REINDEXED)
            else:
                results[position] = Ingested(previous, Outcome.UNCHANGED)
        documents = await self._prepare_records(
            tenant_id, kb_id, [records[position] for position in fresh]
        )
        try:
            revisions = await self._lifecycle.create_many(documents)
        except BaseException:
            for document in documents:
                await self._blobs.delete(document.storage_key)
            raise
        await self._freshness.kbs_changed(revisions)
        await self._start_pipeline(documents)
        for position, document in zip(fresh, documents, strict=True):
            key = keys[position]
            outcome = Outcome.UPDATED if key and key in latest else Outcome.CREATED
            results[position] = Ingested(document, outcome)
        return [result for result in results if result is not None]

    async def _prepare_records(
        self, tenant_id: str, kb_id: str, records: list[Record]
    ) -> list[Document]:
        """Stores the records' text and numbers their versions (a few at a time)."""
        limit = asyncio.Semaphore(RECORD_CONCURRENCY)
        stored: list[str] = []

        async def prepare(record: Record) -> Document:
            async with limit:
                document_id = new_document_id()
                name = record.title.strip() or record.external_id or "text"
                source_key = (
                    record_source_key(record.external_id)
                    if record.external_id
                    else f"text:{document_id}"
                )
                version = await self._lifecycle.next_version(kb_id, source_key)
                original = await self._blobs.store_original(
                    record.as_markdown().encode(), f"{name}.md", document_id
                )
                stored.append(original.storage_key)
                now = utcnow()
                return Document(
                    id=document_id,
                    tenant_id=tenant_id,
                    kb_id=kb_id,
                    filename=name,
                    title=name[:500],
                    content_type=CONTENT_TYPES[".md"],
                    size_bytes=original.size_bytes,
                    sha256=record.fingerprint(),
                    storage_key=original.storage_key,
                    source_key=source_key,
                    version=version,
                    external_id=record.external_id,
                    url=record.url,
                    metadata=dict(record.metadata),
                    parse_status=ParseStatus.QUEUED,
                    stage_started_at={ParseStatus.QUEUED.value: now},
                    created_at=now,
                    updated_at=now,
                )

        try:
            return list(await asyncio.gather(*(prepare(record) for record in records)))
        except BaseException:
            for key in stored:
                await self._blobs.delete(key)
            raise

    async def reindex(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """Runs the pipeline again on a document's stored original."""
        document = await self._documents.restart(tenant_id, kb_id, document_id)
        await self._start_pipeline([document])
        return document

    async def _create(
        self,
        *,
        document_id: str,
        tenant_id: str,
        kb_id: str,
        filename: str,
        title: str,
        content_type: str,
        stored: StoredUpload,
        source_key: str,
        external_id: str | None = None,
        url: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Document:
        now = utcnow()
        try:
            version = await self._lifecycle.next_version(kb_id, source_key)
            document = Document(
                id=document_id,
                tenant_id=tenant_id,
                kb_id=kb_id,
                filename=filename,
                title=title[:500],
                content_type=content_type,
                size_bytes=stored.size_bytes,
                sha256=stored.sha256,
                storage_key=stored.storage_key,
                source_key=source_key,
                version=version,
                external_id=external_id,
                url=url,
                metadata=dict(metadata or {}),
                parse_status=ParseStatus.QUEUED,
                stage_started_at={ParseStatus.QUEUED.value: now},
                created_at=now,
                updated_at=now,
            )
            revisions = await self._lifecycle.create(document)
        except BaseException:
            await self._blobs.delete(stored.storage_key)
            raise
        await self._freshness.kbs_changed(revisions)
        await self._start_pipeline([document])
        return document

    async def _start_pipeline(self, documents: Sequence[Document]) -> None:
        """Publishes `DocumentUploaded` for each; on failure they are marked failed."""
        if not documents:
            return
        events = [
            DocumentUploaded(
                tenant_id=document.tenant_id,
                kb_id=document.kb_id,
                document_id=document.id,
                generation=document.generation,
                storage_key=document.storage_key,
                filename=extraction_name(document.filename, document.content_type),
                content_type=document.content_type,
            )
            for document in documents
        ]
        try:
            await self._publish(events)
        except RetryableError as exc:
            for document in documents:
                await self._documents.mark_failed(
                    document.id,
                    document.generation,
                    "the ingestion queue was unavailable; upload the file again or re-index it",
                )
            raise QueueUnavailable(str(exc)) from exc

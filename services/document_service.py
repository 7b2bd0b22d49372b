"""Reading a knowledge base's items: pages with their pipeline status, one item, its text and
the chunks the vector store holds for it; each as far as the caller may read it (admins see
everything of their tenant, archived items included)."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.governance import Reader
from infra.mongo.blob_store import BlobStore
from infra.mongo.document_repository import DocumentPage, DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.vectorstore.base import VectorStore
from schemas.chunks import ChunkPayload
from schemas.domain import Document, ParseStatus, utcnow
from services.policy_service import PolicyService

# Items whose stored original is their text as indexed (texts, records, wiki pages).
TEXT_ORIGINALS = ("text/markdown", "text/plain")


class DocumentService:
    """What a caller sees of documents."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        store: VectorStore,
        blobs: BlobStore,
        stall_after_s: float,
    ) -> None:
        self._documents = documents
        self._kbs = kbs
        self._store = store
        self._blobs = blobs
        self._stall_after = timedelta(seconds=stall_after_s)

    def stalled_before(self) -> datetime:
        """Documents in progress that have not moved since this moment are stalled."""
        return utcnow() - self._stall_after

    async def list_page(
        self,
        tenant_id: str,
        kb_id: str,
        reader: Reader,
        *,
        status: ParseStatus | None = None,
        stalled: bool = False,
        external_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> DocumentPage:
        """The KB's documents the caller may see, newest first, a page at a time (`NotFound`
        for no such KB); `stalled` keeps only documents in progress that stopped moving,
        `external_id` the versions of that record."""
        await self._kbs.get(tenant_id, kb_id)
        return await self._documents.list_page(
            tenant_id,
            kb_id,
            status=status,
            stalled_before=self.stalled_before() if stalled else None,
            readers=None if reader.admin else reader.key,
            external_id=external_id,
            limit=limit,
            cursor=cursor,
        )

    async def get(self, tenant_id: str, kb_id: str, document_id: str, reader: Reader) -> Document:
        """One document with its pipeline status (404 if the caller may not read it)."""
        document = await self._documents.get(tenant_id, kb_id, document_id)
        return PolicyService.readable(reader, document)

    async def chunks(
        self, tenant_id: str, kb_id: str, document_id: str, reader: Reader, limit: int
    ) -> list[ChunkPayload]:
        """The document's chunks as the vector store holds them (what search can return)."""
        await self.get(tenant_id, kb_id, document_id, reader)
        return await self._store.document_chunks(tenant_id, document_id, limit)

    async def content(self, tenant_id: str, kb_id: str, document_id: str, reader: Reader) -> str:
        """The item's text: a text's own Markdown, or a file's extracted text as its chunks
        hold it (overlaps removed)."""
        document = await self.get(tenant_id, kb_id, document_id, reader)
        if document.content_type in TEXT_ORIGINALS:
            return (await self._blobs.read(document.storage_key)).decode("utf-8", "replace")
        chunks = await self._store.document_chunks(tenant_id, document_id)
        return joined_text(chunks)


def joined_text(chunks: list[ChunkPayload]) -> str:
    """A document's text from its chunks, by their offsets: overlapping parts once, gaps as
    paragraph breaks."""
    text: list[str] = []
    covered = 0
    for chunk in sorted(chunks, key=lambda c: c.chunk_index):
        start = chunk.start if chunk.start is not None else covered
        end = chunk.end if chunk.end is not None else start + len(chunk.chunk_text)
        if start >= covered or not text:
            if text:
                text.append("\n\n")
            text.append(chunk.chunk_text)
        elif end > covered:
            text.append(chunk.chunk_text[covered - start :])
        covered = max(covered, end)
    return "".join(text)

"""Chunk stage: extracted text in, batches of chunks out."""

from __future__ import annotations

import asyncio

from infra.errors import ExtractionFailed
from infra.settings import ChunkingSettings
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchReady, DocumentExtracted
from workers.chunk.chunking import chunk_document
from workers.ports import DocumentStatus, StageResult, TextStore


class ChunkHandler:
    """Splits a document's text into chunks and publishes them in bounded batches."""

    def __init__(
        self,
        documents: DocumentStatus,
        texts: TextStore,
        chunking: ChunkingSettings,
        batch_size: int,
    ) -> None:
        self._documents = documents
        self._texts = texts
        self._chunking = chunking
        self._batch_size = batch_size

    async def __call__(self, event: DocumentExtracted) -> StageResult:
        """Handles one `DocumentExtracted`."""
        document = await self._documents.claim(
            event.document_id, event.generation, ParseStatus.CHUNKING
        )
        if document is None:
            return StageResult(skipped=True)
        extracted = await self._texts.get_extracted(event.extracted_key)
        chunks, char_count = await asyncio.to_thread(
            chunk_document,
            extracted,
            self._chunking.chunk_size_chars,
            self._chunking.chunk_overlap_chars,
        )
        if not chunks:
            raise ExtractionFailed("the document contains no text to index")
        size = self._batch_size
        batches = [chunks[start : start + size] for start in range(0, len(chunks), size)]
        current = await self._documents.record_chunking(
            event.document_id,
            event.generation,
            chunk_count=len(chunks),
            text_char_count=char_count,
            batch_count=len(batches),
            batch_size=size,
        )
        if not current:
            return StageResult(skipped=True)
        return StageResult(
            publish=[
                ChunkBatchReady(
                    tenant_id=event.tenant_id,
                    kb_id=event.kb_id,
                    document_id=event.document_id,
                    generation=event.generation,
                    batch_index=index,
                    batch_count=len(batches),
                    source_name=document.filename,
                    title=extracted.title or document.title,
                    chunks=batch,
                )
                for index, batch in enumerate(batches)
            ],
            finished_document=True,
        )

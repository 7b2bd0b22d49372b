"""Extract stage: original bytes in, stored text out."""

from __future__ import annotations

import asyncio

from schemas.domain import ParseStatus
from schemas.events import DocumentExtracted, DocumentUploaded
from workers.extract.extractors import extract
from workers.ports import DocumentStatus, StageResult, TextStore


class ExtractHandler:
    """Reads the original, extracts its text, stores the text and announces it."""

    def __init__(self, documents: DocumentStatus, texts: TextStore) -> None:
        self._documents = documents
        self._texts = texts

    async def __call__(self, event: DocumentUploaded) -> StageResult:
        """Handles one `DocumentUploaded`."""
        document = await self._documents.claim(
            event.document_id, event.generation, ParseStatus.EXTRACTING
        )
        if document is None:
            return StageResult(skipped=True)
        data = await self._texts.read(event.storage_key)
        # Parsing is CPU-bound and synchronous; keep the consumer's heartbeat going meanwhile.
        extracted = await asyncio.to_thread(extract, data, event.filename)
        key = await self._texts.put_extracted(event.document_id, extracted)
        return StageResult(
            publish=[
                DocumentExtracted(
                    tenant_id=event.tenant_id,
                    kb_id=event.kb_id,
                    document_id=event.document_id,
                    generation=event.generation,
                    extracted_key=key,
                    char_count=extracted.char_count,
                )
            ],
            finished_document=True,
        )

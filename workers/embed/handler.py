"""Embed stage: a batch of chunk texts in, the same batch with dense vectors out."""

from __future__ import annotations

import asyncio

from infra.embedding.base import Embedder
from infra.metrics import CHUNKS_EMBEDDED
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchEmbedded, ChunkBatchReady
from workers.ports import DocumentStatus, StageResult


class EmbedHandler:
    """Embeds one batch of chunks with the process's model."""

    def __init__(self, documents: DocumentStatus, embedder: Embedder) -> None:
        self._documents = documents
        self._embedder = embedder

    async def __call__(self, event: ChunkBatchReady) -> StageResult:
        """Handles one `ChunkBatchReady`."""
        document = await self._documents.advance(
            event.document_id, event.generation, ParseStatus.EMBEDDING
        )
        if document is None:
            return StageResult(skipped=True)
        texts = [chunk.text for chunk in event.chunks]
        vectors = await asyncio.to_thread(self._embedder.embed_documents, texts)
        CHUNKS_EMBEDDED.inc(len(texts))
        await self._documents.record_batch_embedded(
            event.document_id, event.generation, event.batch_index, len(texts)
        )
        embedded = ChunkBatchEmbedded(
            **event.model_dump(exclude={"event_id", "occurred_at"}),
            model=self._embedder.model_id,
            dimensions=self._embedder.dimensions,
            dense_b64=ChunkBatchEmbedded.encode_vectors(vectors),
        )
        return StageResult(publish=[embedded], finished_document=event.last)

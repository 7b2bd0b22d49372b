"""Index stage: embedded batches in, searchable points out.

Points are written hidden (`active=false`) and the whole document becomes searchable at once
when its last batch is in, so search never shows half a document. A document re-indexed under
the same id keeps its chunks visible while the new run overwrites them.
"""

from __future__ import annotations

from infra.metrics import CHUNKS_INDEXED
from infra.vectorstore.base import ChunkPoint, VectorStore
from schemas.domain import ParseStatus, chunk_id, chunk_point_id
from schemas.events import ChunkBatchEmbedded
from workers.ports import DocumentStatus, KbCounters, StageResult


def chunk_points(event: ChunkBatchEmbedded, active: bool) -> list[ChunkPoint]:
    """The points of one embedded batch, payload included."""
    vectors = event.vectors()
    points = []
    for row, chunk in enumerate(event.chunks):
        points.append(
            ChunkPoint(
                point_id=chunk_point_id(event.document_id, chunk.chunk_index),
                dense=vectors[row],
                payload={
                    "tenant_id": event.tenant_id,
                    "kb_id": event.kb_id,
                    "document_id": event.document_id,
                    "chunk_id": chunk_id(event.document_id, chunk.chunk_index),
                    "chunk_index": chunk.chunk_index,
                    "chunk_text": chunk.text,
                    "active": active,
                    "source_name": event.source_name,
                    "document_title": event.title,
                    "page": chunk.page,
                    "heading_path": chunk.heading_path,
                    "start": chunk.start,
                    "end": chunk.end,
                    "generation": event.generation,
                },
            )
        )
    return points


class IndexHandler:
    """Writes a batch to the vector store and finishes the document after its last batch."""

    def __init__(self, documents: DocumentStatus, kbs: KbCounters, store: VectorStore) -> None:
        self._documents = documents
        self._kbs = kbs
        self._store = store

    async def __call__(self, event: ChunkBatchEmbedded) -> StageResult:
        """Handles one `ChunkBatchEmbedded`."""
        document = await self._documents.advance(
            event.document_id, event.generation, ParseStatus.INDEXING
        )
        if document is None:
            return StageResult(skipped=True)
        points = chunk_points(event, active=document.indexed_chunk_count > 0)
        await self._store.upsert(points)
        CHUNKS_INDEXED.inc(len(points))
        progress = await self._documents.record_batch_indexed(
            event.document_id, event.generation, event.batch_index, len(points)
        )
        if progress is None:
            current = await self._documents.find(event.document_id)
            if current is None or current.parse_status is ParseStatus.DELETING:
                # Deleted while this batch was written: take the points back out. (A newer
                # generation of the same document overwrites them instead.)
                await self._store.delete_points([p.point_id for p in points])
            return StageResult(skipped=True)
        indexed, batch_count = progress
        if batch_count is None or indexed < batch_count:
            return StageResult()
        chunk_count = document.chunk_count or 0
        await self._store.set_document_active(event.tenant_id, event.document_id, True)
        # A previous generation with more chunks leaves a tail behind; remove it.
        await self._store.trim_document(event.tenant_id, event.document_id, keep_chunks=chunk_count)
        finished = await self._documents.mark_indexed(event.document_id, event.generation)
        if finished is None:
            return StageResult(skipped=True)
        _, previous_chunks = finished
        await self._kbs.add_counts(event.kb_id, chunks=chunk_count - previous_chunks)
        return StageResult(finished_document=True)

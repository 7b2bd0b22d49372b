"""Chunk stage: parts of extracted text in, batches of chunks out.

The chunker's small carried-over state lives on the document, so the parts of one document can
be chunked one message at a time. Progress is saved only after the part's batches are
published: a crash in between re-publishes the same batches (same indices, same chunk ids),
which the later stages take idempotently.

Each chunk gets its context prefix here (`context.py`): this stage knows the document's title
and headings, and waiting on an LLM costs it no CPU.
"""

from __future__ import annotations

import asyncio
import logging

from core.errors import ExtractionFailed, NotFound
from infra.settings.ingest import ChunkingSettings
from schemas.domain import ChunkingProgress, ChunkRecord, Document
from schemas.events import ChunkBatchReady, DocumentExtracted
from workers.chunk.chunking import ChunkerState, feed
from workers.chunk.context import Contextualizer
from workers.ports import DocumentStatus, StageResult, TextStore

log = logging.getLogger(__name__)


class ChunkHandler:
    """Chunks each part of a document and publishes the chunks in bounded batches."""

    def __init__(
        self,
        documents: DocumentStatus,
        texts: TextStore,
        chunking: ChunkingSettings,
        batch_size: int,
        contexts: Contextualizer,
    ) -> None:
        self._documents = documents
        self._texts = texts
        self._chunking = chunking
        self._batch_size = batch_size
        self._contexts = contexts

    async def __call__(self, event: DocumentExtracted, document: Document | None) -> StageResult:
        """Handles one `DocumentExtracted` part of a document now `chunking` (`document`: as
        read by this message; None where this message took the document into chunking and
        the event carries its title, so that nothing of the run is chunked yet)."""
        # Where the chunk stage is in this run, as this message's `advance` read it.
        progress = (document.chunker if document else None) or ChunkingProgress()
        title = str(event.title) if document is None else document.title
        if event.part_index < progress.next_part:
            return StageResult(skipped=True)
        if event.part_index > progress.next_part:
            # An earlier part was lost (published to a broker that then restarted without it;
            # the parts of a document share a partition, so they never overtake each other).
            # Waiting cannot bring it back: the document stops moving, and the reconciler
            # starts it again.
            log.warning(
                "extracted part %d of %s arrived before part %d; left for the reconciler",
                event.part_index, event.document_id, progress.next_part,
            )  # fmt: skip
            return StageResult(skipped=True)
        try:
            part = event.text or await self._texts.get_extracted(str(event.extracted_key))
        except NotFound:
            # The database lost a write it had acknowledged (a crash): the document cannot
            # go on from here. It stops moving, and the reconciler starts it again.
            log.warning(
                "extracted part %d of %s is gone; left for the reconciler to start again",
                event.part_index, event.document_id,
            )  # fmt: skip
            return StageResult(skipped=True)
        state, chunks = await asyncio.to_thread(
            feed,
            ChunkerState.model_validate(progress.state),
            part.segments,
            self._chunking.chunk_size_chars,
            self._chunking.chunk_overlap_chars,
            final=event.last,
            batch_size=self._batch_size,
        )
        # The chunks held back for the next part are known already: text after the last one.
        chunks = await self._contexts.contextualize(title, chunks, following=state.held)
        batches = [
            chunks[start : start + self._batch_size]
            for start in range(0, len(chunks), self._batch_size)
        ]
        next_batch = progress.next_batch + len(batches)
        if event.last:
            if state.next_index == 0:
                raise ExtractionFailed("the document contains no text to index")
            # Recorded before the last batches go out, so the index stage knows the total
            # when the last of them arrives.
            current = await self._documents.record_chunking(
                event.document_id,
                event.generation,
                chunk_count=state.next_index,
                text_char_count=state.length,
                batch_count=next_batch,
            )
            if not current:
                return StageResult(skipped=True)

        async def save_progress() -> None:
            if event.last and event.extracted_key is None:
                # Nothing follows the last part to resume from: a redelivered one is chunked
                # again from the state before it, into the same chunks (their ids and points
                # are the same), where saving would cost a write for every document.
                return
            saved = ChunkingProgress(
                next_part=event.part_index + 1,
                next_batch=next_batch,
                state=state.model_dump(mode="json"),
            )
            await self._documents.save_chunking_progress(
                event.document_id, event.generation, event.part_index, saved
            )
            if event.extracted_key is not None:
                await self._texts.delete(event.extracted_key)

        return StageResult(
            publish=[
                self._batch(
                    event,
                    progress.next_batch + offset,
                    batch,
                    last=event.last and offset == len(batches) - 1,
                )
                for offset, batch in enumerate(batches)
            ],
            after_publish=save_progress,
            finished_document=event.last,
        )

    @staticmethod
    def _batch(
        event: DocumentExtracted,
        index: int,
        chunks: list[ChunkRecord],
        *,
        last: bool,
    ) -> ChunkBatchReady:
        return ChunkBatchReady(
            tenant_id=event.tenant_id,
            kb_id=event.kb_id,
            document_id=event.document_id,
            generation=event.generation,
            batch_index=index,
            last=last,
            chunks=chunks,
        )

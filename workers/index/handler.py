"""Index stage: embedded batches in, searchable points out.

Points are written hidden (`active=false`) and a document becomes searchable at once when its
last batch is in: in one step its chunks are shown and the chunks of the older versions of the
same source (same file name or external id) are hidden, so search never shows two versions of
a document and never none; once MongoDB has the version finished (live), the older versions'
chunks are deleted. A document re-indexed under the same id keeps its chunks visible while the
new run overwrites them.

A run that fails permanently in this stage, even after it was published (the step that
finishes it in MongoDB failing), is withdrawn before the document is marked failed: its points
are deleted and, in the same step, the live older version is shown again; its chunks leave the
KB's count (`IndexHandler.withdraw`). So a failed new version leaves the old one as it was,
searchable, and a failed re-index under the same id (whose run overwrote the indexed chunks)
leaves nothing of the document searchable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from core.filters import chunks_of_document, older_versions
from core.sparse import SparseVector, packed_terms
from infra.embedding.base import Embedder
from infra.mongo.lifecycle import Finished, Superseded
from infra.process.metrics import CHUNKS_INDEXED
from infra.vectorstore.base import (
    ChunkPoint,
    PublishedDocument,
    VectorStore,
    WithdrawnDocument,
)
from infra.vectorstore.generational import MissingVectors
from schemas.chunks import ChunkPayload
from schemas.domain import Document, ParseStatus, chunk_id, chunk_point_id, utcnow
from schemas.events import ChunkBatchEmbedded
from schemas.index_generations import Generations, ModelIdentity
from workers.ports import DocumentStatus, Freshness, Lifecycle, StageResult, TextStore

log = logging.getLogger(__name__)


def chunk_points(
    event: ChunkBatchEmbedded, document: Document, active: bool, live: ModelIdentity
) -> dict[ModelIdentity, list[ChunkPoint]]:
    """The points of one embedded batch, with everything needed to filter and cite them: the
    same points (ids, payloads, sparse vectors) with each model's dense vectors, by model
    (`live`: the model of a batch that names none)."""
    sparse = event.sparse()
    written_at = utcnow().isoformat()
    shared: list[tuple[str, ChunkPayload, SparseVector | None]] = []
    for row, chunk in enumerate(event.chunks):
        payload = ChunkPayload(
            tenant_id=event.tenant_id,
            kb_id=event.kb_id,
            document_id=event.document_id,
            source_key=document.source_key,
            version=document.version,
            chunk_index=chunk.chunk_index,
            active=active,
            readers=document.readers,
            chunk_id=chunk_id(event.document_id, chunk.chunk_index),
            chunk_text=chunk.text,
            context=chunk.context,
            terms=packed_terms(chunk.embedding_text),
            source_name=document.filename,
            document_title=document.title,
            page=chunk.page,
            heading_path=chunk.heading_path,
            start=chunk.start,
            end=chunk.end,
            url=document.url,
            indexed_at=written_at,
        )
        terms = sparse[row] if row < len(sparse) else None
        point_id = chunk_point_id(event.document_id, chunk.chunk_index)
        shared.append((point_id, payload, SparseVector(*terms) if terms else None))
    return {
        model: [
            ChunkPoint(point_id=point_id, dense=vectors[row], payload=payload, sparse=terms)
            for row, (point_id, payload, terms) in enumerate(shared)
        ]
        for model, vectors in event.vectors_by_model(live).items()
    }


class IndexStore(VectorStore, Protocol):
    """The vector store across its generations (`infra.vectorstore.generational`)."""

    async def generations(self) -> Generations:
        """The generations, as read lately."""
        ...

    async def upsert_embedded(self, points: Mapping[ModelIdentity, Sequence[ChunkPoint]]) -> None:
        """Writes the chunks to every generation being filled, each with its model's points;
        `MissingVectors` if a model's are not among them."""
        ...


class Encoder(Protocol):
    """Loads a model to embed a batch that lacks its vectors (`infra.embedding.encoders`)."""

    async def get(self, model: ModelIdentity) -> Embedder:
        """The model's embedder."""
        ...


class IndexHandler:
    """Writes a batch to the vector store and finishes the document after its last batch."""

    def __init__(
        self,
        documents: DocumentStatus,
        lifecycle: Lifecycle,
        store: IndexStore,
        files: TextStore,
        freshness: Freshness,
        encoders: Encoder,
    ) -> None:
        self._documents = documents
        self._lifecycle = lifecycle
        self._store = store
        self._files = files
        self._freshness = freshness
        self._encoders = encoders

    async def __call__(self, event: ChunkBatchEmbedded, document: Document) -> StageResult:
        """Handles one `ChunkBatchEmbedded` of a document now `indexing`."""
        live = (await self._store.generations()).live.model
        by_model = chunk_points(event, document, document.indexed_chunk_count > 0, live)
        try:
            await self._store.upsert_embedded(by_model)
        except MissingVectors as missing:
            # Embedded before a generation began to be built (or before this process saw it
            # go live): its model embeds the batch here.
            for model in missing.models:
                by_model[model] = await self._embedded(event, by_model[next(iter(by_model))], model)
            await self._store.upsert_embedded(by_model)
        points = next(iter(by_model.values()))
        CHUNKS_INDEXED.inc(len(points))
        progress = await self._documents.record_batch_indexed(
            event.document_id,
            event.generation,
            event.batch_index,
            len(points),
            batch_count=document.batch_count,
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
        return await self._finish(document)

    async def _embedded(
        self, event: ChunkBatchEmbedded, points: list[ChunkPoint], model: ModelIdentity
    ) -> list[ChunkPoint]:
        """`points` with `model`'s dense vectors in place of theirs."""
        embedder = await self._encoders.get(model)
        texts = [chunk.embedding_text for chunk in event.chunks]
        vectors = await asyncio.to_thread(embedder.embed_documents, texts)
        log.info("embedded %d chunks of %s by %s here", len(texts), event.document_id, model.label)
        return [replace(point, dense=vectors[row]) for row, point in enumerate(points)]

    async def _finish(self, document: Document) -> StageResult:
        live = await self._lifecycle.live_version(document.kb_id, document.source_key)
        if live > document.version:
            await self._drop_superseded(document)
            return StageResult(skipped=True)
        # Who may read it as read by this message (`advance`), not when the run began: its
        # permissions may have changed meanwhile.
        readers = document.readers
        await self._store.publish_document(
            PublishedDocument(
                tenant_id=document.tenant_id,
                kb_id=document.kb_id,
                document_id=document.id,
                source_key=document.source_key,
                version=document.version,
                keep_chunks=document.chunk_count or 0,
                readers=tuple(readers),
            )
        )
        # What search shows of the KB changed with the publish: its revision moves on (and
        # cached answers of older ones retire) before the document is marked indexed, so that
        # whoever sees it indexed is answered with it, never from a cache of before.
        await self._freshness.kbs_changed(await self._lifecycle.touch(document.kb_id))
        outcome = await self._finish_run(document)
        if outcome is None:
            # A replay: if this run did finish (and the older versions' deletion was cut
            # short), the older versions' hidden chunks go now.
            current = await self._documents.find(document.id)
            if (
                current is not None
                and current.generation == document.generation
                and current.parse_status is ParseStatus.INDEXED
            ):
                await self._delete_older_versions(document)
            return StageResult(skipped=True)
        if isinstance(outcome, Superseded):
            await self._drop_superseded(outcome.document)
            return StageResult(skipped=True)
        await self._delete_older_versions(document)
        for retired in outcome.retired:
            await self._delete_files(retired)
        return StageResult(finished_document=True)

    async def _finish_run(self, document: Document) -> Finished | Superseded | None:
        """Marks the published run indexed. In one step if the document is still stored as
        read; if not (most often, who may read it changed since), who may read it as stored
        now is set on its chunks first (a change stored between the read and the publish
        wrote its readers to the store before the publish overwrote them), and the run is
        finished from what is stored. Either way its chunks carry the stored readers before
        it shows as indexed."""
        finished = await self._lifecycle.finish_as_read(document)
        if finished is not None:
            return finished
        current = await self._documents.find(document.id)
        latest = (current or document).readers
        if latest != document.readers:
            await self._store.set_readers(
                chunks_of_document(document.tenant_id, document.id), latest
            )
        return await self._lifecycle.finish(document.id, document.generation)

    async def withdraw(self, event: ChunkBatchEmbedded) -> None:
        """Before a run of the document is marked failed: takes its points out of search
        (published or not) and shows the live older version of its source again, then takes
        its chunks out of the KB's count. Nothing if the run is no longer current or
        finished."""
        current = await self._documents.find(event.document_id)
        if (
            current is None
            or current.generation != event.generation
            or current.parse_status in (ParseStatus.INDEXED, ParseStatus.DELETING)
        ):
            return
        live = await self._lifecycle.live_version(current.kb_id, current.source_key)
        await self._store.withdraw_document(WithdrawnDocument.run_of(current, live))
        revisions = await self._lifecycle.withdraw(current.id, current.generation)
        if revisions:
            await self._freshness.kbs_changed(revisions)
        log.warning(
            "document %s (version %d): its failed run was taken out of search", current.id,
            current.version,
        )  # fmt: skip

    async def _delete_older_versions(self, document: Document) -> None:
        """Deletes the chunks of the source's versions older than this live one (hidden when
        it was published)."""
        source = (document.tenant_id, document.kb_id, document.source_key)
        await self._store.delete(older_versions(*source, document.version))

    async def _drop_superseded(self, document: Document) -> None:
        """A newer version went live first: this one is removed, never shown."""
        log.info("document %s (version %d) was superseded", document.id, document.version)
        await self._store.delete(chunks_of_document(document.tenant_id, document.id))
        removed = await self._lifecycle.remove(document.id)
        if removed is not None:
            await self._freshness.kbs_changed(removed.revisions)
            await self._delete_files(document)

    async def _delete_files(self, document: Document) -> None:
        await self._files.delete(document.storage_key)
        await self._files.delete_extracted(document.id)

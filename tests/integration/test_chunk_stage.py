"""The chunk stage when the text it should read is gone, or an earlier part never came (lost
with a broker that restarted): the document is not failed (nothing is wrong with it), it stops
moving, and the reconciler starts it again. A last part delivered twice is chunked into the
same batches (real MongoDB; under a second)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from infra.mongo.blob_store import BlobStore
from infra.mongo.client import Database
from infra.mongo.context_cache import ContextCache
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings.ingest import ChunkingSettings, ContextualSettings, IngestSettings
from infra.settings.stages import StagePolicy
from schemas.domain import Document, ExtractedDocument, ParseStatus, TextSegment
from schemas.events import ChunkBatchReady, DocumentExtracted, Event
from tests.factories import make_document
from workers.chunk.context import Contextualizer
from workers.chunk.handler import ChunkHandler
from workers.runtime import Stage, StageRunner, carried_stage


async def _extracting(
    db: Database, chunking: ChunkingSettings, *, batch_size: int
) -> tuple[DocumentRepository, Document, Stage[DocumentExtracted]]:
    """A document being extracted, and the chunk stage as the worker runs it."""
    documents = DocumentRepository(db)
    document = make_document(parse_status=ParseStatus.EXTRACTING)
    await DocumentLifecycle(db.client, db, Outbox(db)).create([document])
    handler = ChunkHandler(
        documents,
        BlobStore(db),
        chunking,
        batch_size=batch_size,
        contexts=Contextualizer(ContextualSettings(), None, ContextCache(db)),
    )
    stage = carried_stage(
        "chunk", DocumentExtracted, ParseStatus.CHUNKING, handler, documents, StagePolicy()
    )
    return documents, document, stage


@pytest.mark.parametrize(
    "part_index", [0, 1], ids=["the part's text is gone", "an earlier part never came"]
)
async def test_a_lost_extracted_part_leaves_the_document_to_the_reconciler(
    db: Database, part_index: int
) -> None:
    documents, document, stage = await _extracting(db, ChunkingSettings(), batch_size=8)
    published: list[Event] = []
    dead: list[bytes] = []

    async def publish(events: Sequence[Event]) -> None:
        published.extend(events)

    async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
        dead.append(raw)

    event = DocumentExtracted(
        tenant_id=document.tenant_id, kb_id=document.kb_id, document_id=document.id,
        generation=1, part_index=part_index, last=True,
        extracted_key="gridfs:extracted/000000000000000000000000", char_count=10,
        title=document.title,
    )  # fmt: skip
    runner = StageRunner(stage, documents, publish, dead_letter, IngestSettings())
    await runner.run(event.model_dump_json().encode())
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.CHUNKING
    assert stored.parse_error is None
    assert (published, dead) == ([], [])


async def test_a_last_part_delivered_twice_is_chunked_into_the_same_batches(db: Database) -> None:
    chunking = ChunkingSettings(chunk_size_chars=200, chunk_overlap_chars=20)
    documents, document, stage = await _extracting(db, chunking, batch_size=4)
    published: list[Event] = []

    async def publish(events: Sequence[Event]) -> None:
        published.extend(events)

    async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
        raise AssertionError(headers)

    text = " ".join(f"Sentence {n} of the only part, long enough to be chunked." for n in range(60))
    part = ExtractedDocument(title="", segments=[TextSegment(text=text)])
    event = DocumentExtracted(
        tenant_id=document.tenant_id, kb_id=document.kb_id, document_id=document.id,
        generation=1, part_index=0, last=True, text=part, char_count=part.char_count,
        title=document.title,
    )  # fmt: skip
    runner = StageRunner(stage, documents, publish, dead_letter, IngestSettings())
    await runner.run(event.model_dump_json().encode())
    first = [e for e in published if isinstance(e, ChunkBatchReady)]
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.CHUNKING
    assert stored.chunk_count is not None
    assert stored.chunk_count > 4
    assert stored.batch_count == len(first) > 1
    published.clear()
    await runner.run(event.model_dump_json().encode())
    again = [e for e in published if isinstance(e, ChunkBatchReady)]
    assert [(b.batch_index, b.last, b.chunks) for b in again] == [
        (b.batch_index, b.last, b.chunks) for b in first
    ]
    after = await documents.find(document.id)
    assert after is not None
    assert (after.chunk_count, after.batch_count) == (stored.chunk_count, stored.batch_count)

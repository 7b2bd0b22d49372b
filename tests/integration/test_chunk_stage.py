"""The chunk stage when the text it should read is gone, or an earlier part never came (lost
with a broker that restarted): the document is not failed (nothing is wrong with it), it stops
moving, and the reconciler starts it again."""

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
from schemas.domain import ParseStatus
from schemas.events import DocumentExtracted, Event
from tests.factories import make_document
from workers.chunk.context import Contextualizer
from workers.chunk.handler import ChunkHandler
from workers.runtime import StageRunner, carried_stage


@pytest.mark.parametrize(
    "part_index", [0, 1], ids=["the part's text is gone", "an earlier part never came"]
)
async def test_a_lost_extracted_part_leaves_the_document_to_the_reconciler(
    db: Database, part_index: int
) -> None:
    documents = DocumentRepository(db)
    document = make_document(parse_status=ParseStatus.EXTRACTING)
    await DocumentLifecycle(db.client, db, Outbox(db)).create([document])
    handler = ChunkHandler(
        documents,
        BlobStore(db),
        ChunkingSettings(),
        batch_size=8,
        contexts=Contextualizer(ContextualSettings(), None, ContextCache(db)),
    )
    stage = carried_stage(
        "chunk", DocumentExtracted, ParseStatus.CHUNKING, handler, documents, StagePolicy()
    )
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

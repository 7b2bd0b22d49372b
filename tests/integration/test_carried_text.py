"""What travels in the pipeline's events rather than through GridFS. A small original goes to
the extract stage in its event (stored all the same, for a re-run), which reads nothing back;
extracted text goes from the extract stage to the chunk stage in its event when small and
costs GridFS nothing; a part over `extract_inline_max_bytes` is stored, read and then deleted.
Either way the chunk stage makes the same chunks. Real MongoDB/GridFS and a real parser
process; about 3 s."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import pytest

from infra.mongo.blob_store import BlobStore
from infra.mongo.client import EXTRACTED_BUCKET, Database
from infra.mongo.context_cache import ContextCache
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings import Settings
from infra.settings.ingest import ChunkingSettings, ContextualSettings, IngestSettings
from infra.settings.stages import StagePolicy
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchReady, DocumentExtracted, DocumentUploaded, Event
from tests.factories import make_document
from workers.chunk.context import Contextualizer
from workers.chunk.handler import ChunkHandler
from workers.extract.extractors import ExtractionLimits, OcrPolicy
from workers.extract.handler import ExtractHandler
from workers.extract.sandbox import ParserSandbox
from workers.runtime import Stage, StageRunner, carried_stage

MB = 1024 * 1024
E = TypeVar("E", bound=Event)
TEXT = "\n\n".join(f"Paragraph {n} says what the manual says about item {n}." for n in range(60))


class Stages:
    """The extract and chunk stages' runners over the test's database, with what they
    published."""

    def __init__(
        self, db: Database, parsers: ParserSandbox, inline_max_bytes: int, keep_bytes: int = 0
    ) -> None:
        self.db = db
        self.documents = DocumentRepository(db)
        self.blobs = BlobStore(db, keep_bytes)
        self.published: list[Event] = []
        self.dead_letters: list[dict[str, str]] = []
        extract = ExtractHandler(self.blobs, self.publish, 32_000, parsers, inline_max_bytes)
        chunk = ChunkHandler(
            self.documents,
            self.blobs,
            ChunkingSettings(),
            batch_size=8,
            contexts=Contextualizer(ContextualSettings(), None, ContextCache(db)),
        )
        policy = StagePolicy(max_attempts=1, time_limit_s=60)
        self.extract = self._runner(
            carried_stage(
                "extract", DocumentUploaded, ParseStatus.EXTRACTING, extract, self.documents, policy
            )
        )
        self.chunk = self._runner(
            carried_stage(
                "chunk", DocumentExtracted, ParseStatus.CHUNKING, chunk, self.documents, policy
            )
        )

    def _runner(self, stage: Stage[E]) -> StageRunner[E]:
        return StageRunner(stage, self.documents, self.publish, self.dead_letter, IngestSettings())

    async def publish(self, events: Sequence[Event]) -> None:
        self.published.extend(events)

    async def dead_letter(self, raw: bytes, headers: dict[str, str]) -> None:
        self.dead_letters.append(headers)

    async def stored_parts(self) -> int:
        return await self.db[f"{EXTRACTED_BUCKET}.files"].count_documents({})

    async def extracted(self, *, forget_original: bool = False) -> list[DocumentExtracted]:
        """Uploads TEXT as a Markdown file (its original carried in its event if the blob
        store handed it back) and extracts it; the parts it made. `forget_original` deletes
        the stored original first, as if GridFS had lost it."""
        document = make_document(filename="manual.md", title="manual.md")
        stored = await self.blobs.store_original(TEXT.encode(), "manual.md", document.id)
        document = document.model_copy(update={"storage_key": stored.storage_key})
        carried = {document.id: stored.data} if stored.data is not None else {}
        lifecycle = DocumentLifecycle(self.db.client, self.db, Outbox(self.db))
        (queued,) = (await lifecycle.create([document], carried)).events
        if forget_original:
            await self.blobs.delete(stored.storage_key)
        await self.extract.run(queued.value)
        return [e for e in self.published if isinstance(e, DocumentExtracted)]

    async def chunked(self, parts: Sequence[DocumentExtracted]) -> list[str]:
        """Chunks the parts; the chunks' texts, in order."""
        for part in parts:
            await self.chunk.run(part.model_dump_json().encode())
        batches = [e for e in self.published if isinstance(e, ChunkBatchReady)]
        assert batches[-1].last
        return [chunk.text for batch in batches for chunk in batch.chunks]


@pytest.fixture
async def parsers() -> AsyncIterator[ParserSandbox]:
    sandbox = ParserSandbox(2048 * MB, OcrPolicy(), ExtractionLimits())
    yield sandbox
    await sandbox.close()


async def test_a_small_original_travels_in_its_event_and_is_not_read_back(
    db: Database, parsers: ParserSandbox
) -> None:
    carried = Stages(db, parsers, inline_max_bytes=256 * 1024, keep_bytes=192 * 1024)
    parts = await carried.extracted(forget_original=True)
    assert "item 59." in (await carried.chunked(parts))[-1]
    # Over the limit, the event names the stored original only: lost, the document fails.
    stored_only = Stages(db, parsers, inline_max_bytes=256 * 1024, keep_bytes=100)
    assert await stored_only.extracted(forget_original=True) == []
    (failed,) = stored_only.dead_letters
    assert "no longer stored" in failed["error"]
    assert carried.dead_letters == []


def test_an_original_of_any_bytes_survives_its_event() -> None:
    data = bytes(range(256)) + b"%PDF-1.7\n\xff\x00"
    event = DocumentUploaded.of(make_document(filename="a.pdf"), data)
    again = DocumentUploaded.model_validate_json(event.model_dump_json())
    assert again.original == data
    assert DocumentUploaded.of(make_document()).original is None


async def test_a_small_part_travels_in_its_event_and_nothing_is_stored(
    db: Database, parsers: ParserSandbox
) -> None:
    stages = Stages(db, parsers, inline_max_bytes=256 * 1024)
    parts = await stages.extracted()
    assert [(p.extracted_key, p.text is not None) for p in parts] == [(None, True)]
    assert await stages.stored_parts() == 0
    chunks = await stages.chunked(parts)
    assert "item 0." in chunks[0]
    assert "item 59." in chunks[-1]


async def test_a_part_over_the_limit_is_stored_then_deleted_once_chunked(
    db: Database, parsers: ParserSandbox
) -> None:
    carried = Stages(db, parsers, inline_max_bytes=256 * 1024)
    expected = await carried.chunked(await carried.extracted())
    stages = Stages(db, parsers, inline_max_bytes=1_000)
    parts = await stages.extracted()
    assert [(p.extracted_key is not None, p.text) for p in parts] == [(True, None)]
    assert await stages.stored_parts() == 1
    assert await stages.chunked(parts) == expected
    assert await stages.stored_parts() == 0  # deleted once its batches went out


def test_a_part_must_be_carried_or_stored_not_both_nor_neither() -> None:
    base = {"tenant_id": "t", "kb_id": "k", "document_id": "d", "generation": 1}
    with pytest.raises(ValueError, match="exactly one"):
        DocumentExtracted(**base, part_index=0, last=True, char_count=0)


def test_the_inline_limit_must_leave_room_in_a_kafka_message() -> None:
    with pytest.raises(ValueError, match="EXTRACT_INLINE_MAX_BYTES"):
        Settings(ingest=IngestSettings(extract_inline_max_bytes=2 * MB))

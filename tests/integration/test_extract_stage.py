"""The extract stage through its runner (and the chunk stage's entry, which stores a title
found in the file), over real MongoDB/GridFS and real parser processes: a file is read part by
part, a file the parser cannot survive fails its document with a reason, and a stored
original the database lost fails it with what to do."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from infra.mongo.blob_store import BlobStore
from infra.mongo.client import Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings.ingest import IngestSettings
from infra.settings.stages import StagePolicy
from schemas.domain import Document, ParseStatus
from schemas.events import DocumentExtracted, DocumentUploaded, Event
from tests.conftest import FIXTURES
from tests.factories import make_document
from tests.fixtures.hostile.corpus import bomb_pdf
from workers.extract.extractors import ExtractionLimits, OcrPolicy
from workers.extract.handler import ExtractHandler
from workers.extract.sandbox import ParserSandbox
from workers.ports import StageResult
from workers.runtime import StageRunner, carried_stage

MB = 1024 * 1024


class Stage:
    """The extract stage's runner over the test's database, with what it published."""

    def __init__(self, db: Database, parsers: ParserSandbox) -> None:
        self.db = db
        self.documents = DocumentRepository(db)
        self.blobs = BlobStore(db)
        self.published: list[Event] = []
        self.dead: list[dict[str, str]] = []
        handler = ExtractHandler(self.blobs, self.publish, 4_000, parsers)
        stage = carried_stage(
            "extract", DocumentUploaded, ParseStatus.EXTRACTING, handler, self.documents,
            StagePolicy(max_attempts=1, time_limit_s=60),
        )  # fmt: skip
        self.runner = StageRunner(stage, self.documents, self.publish, self.dead_letter,
                                  IngestSettings())  # fmt: skip
        # The chunk stage's entry, as the chunk stage makes it (its handler does nothing here):
        # a title found in the file is stored by the move into chunking.
        taking_in = carried_stage(
            "chunk", DocumentExtracted, ParseStatus.CHUNKING, self.take_in, self.documents,
            StagePolicy(max_attempts=1, time_limit_s=60),
        )  # fmt: skip
        self.chunk_entry = StageRunner(taking_in, self.documents, self.publish, self.dead_letter,
                                       IngestSettings())  # fmt: skip

    async def take_in(self, event: DocumentExtracted, document: Document | None) -> StageResult:
        return StageResult()

    async def publish(self, events: Sequence[Event]) -> None:
        self.published.extend(events)

    async def dead_letter(self, raw: bytes, headers: dict[str, str]) -> None:
        self.dead.append(headers)

    async def run(
        self, name: str, data: bytes | None, *, title: str | None = None, carried: bool = True
    ) -> Document:
        """Stores `data` (None: stores nothing) as a queued document and extracts it.
        `carried`: its event carries the run (as the API's do); False, as events of before."""
        document = make_document(filename=name, title=title or name)
        if data is not None:
            stored = await self.blobs.store_original(data, name, document.id)
            document = document.model_copy(update={"storage_key": stored.storage_key})
        await DocumentLifecycle(self.db.client, self.db, Outbox(self.db)).create([document])
        event = DocumentUploaded.of(document)
        if not carried:
            event = event.model_copy(update={"title": None, "title_is_filename": False})
        await self.runner.run(event.model_dump_json().encode())
        for part in self.published:
            if isinstance(part, DocumentExtracted) and part.document_id == document.id:
                await self.chunk_entry.run(part.model_dump_json().encode())
        found = await self.documents.find(document.id)
        assert found is not None
        return found


@pytest.fixture
async def stage(db: Database) -> AsyncIterator[Stage]:
    parsers = ParserSandbox(2048 * MB, OcrPolicy(), ExtractionLimits())
    yield Stage(db, parsers)
    await parsers.close()


async def test_a_pdf_is_handed_on_in_parts_with_its_own_title(stage: Stage) -> None:
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    document = await stage.run("geobase.pdf", data)
    parts = [e for e in stage.published if isinstance(e, DocumentExtracted)]
    assert len(parts) > 1
    assert [p.part_index for p in parts] == list(range(len(parts)))
    assert [p.last for p in parts] == [False] * (len(parts) - 1) + [True]
    assert document.title != "geobase.pdf"
    assert document.parse_error is None
    # The chunk stage writes the chunks under the title as stored, carried in each part.
    assert {p.title for p in parts} == {document.title}


@pytest.mark.parametrize("carried", [True, False], ids=["carried", "read"])
async def test_a_title_of_its_own_is_kept_and_handed_on(stage: Stage, carried: bool) -> None:
    """Whether the event carries the run or the stage reads the document (events of before),
    the file's own title replaces only a title that was the file name (stored as the chunk
    stage takes the document in)."""
    data = b"# Heading in the file\n\nSome text under it."
    named = await stage.run("notes.md", data, carried=carried)
    titled = await stage.run("notes.md", data, title="Release notes", carried=carried)
    assert named.title == "Heading in the file"
    assert titled.title == "Release notes"
    parts = [e for e in stage.published if isinstance(e, DocumentExtracted)]
    assert [(p.document_id, p.title) for p in parts] == [
        (named.id, "Heading in the file"),
        (titled.id, "Release notes"),
    ]


async def test_a_decompression_bomb_fails_its_document_with_a_reason(stage: Stage) -> None:
    document = await stage.run("bomb.pdf", bomb_pdf())
    assert document.parse_status is ParseStatus.FAILED
    assert "more memory than the 2,048 MB a file may use" in (document.parse_error or "")
    assert stage.published == []
    assert len(stage.dead) == 1
    # The next file is read as usual.
    after = await stage.run("note.txt", b"Read after the bomb.")
    assert after.parse_status is ParseStatus.CHUNKING
    assert after.parse_error is None


async def test_an_original_the_database_lost_fails_saying_to_upload_it_again(
    stage: Stage,
) -> None:
    document = await stage.run("lost.pdf", None)
    assert document.parse_status is ParseStatus.FAILED
    assert document.parse_error == (
        "the uploaded file is no longer stored (the database lost it); upload it again"
    )

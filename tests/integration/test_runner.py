"""The stage runner's failure policy, against real MongoDB (Kafka replaced by lists)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

import pytest

from core.errors import ExtractionFailed, ServiceUnavailable
from infra.mongo.client import Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings.ingest import IngestSettings
from infra.settings.stages import StagePolicy
from schemas.domain import Document, ParseStatus
from schemas.events import DocumentUploaded, Event
from tests.factories import make_document
from workers.ports import StageResult
from workers.runtime import Stage, StageRunner, document_stage

BACKOFF = IngestSettings(retry_backoff_s=0.01, retry_backoff_max_s=0.02)
POLICY = StagePolicy(max_attempts=3, time_limit_s=30)


class Captured:
    """What the runner published and dead-lettered."""

    def __init__(self) -> None:
        self.published: list[Event] = []
        self.dead: list[tuple[bytes, dict[str, str]]] = []

    async def publish(self, events: Sequence[Event]) -> None:
        self.published.extend(events)

    async def dead_letter(self, raw: bytes, headers: dict[str, str]) -> None:
        self.dead.append((raw, headers))


async def _document(db: Database) -> tuple[DocumentRepository, Document, bytes]:
    kb = await KnowledgeBaseRepository(db).create("acme", "KB", "", "en")
    document = make_document("acme", kb.id)
    await DocumentLifecycle(db.client, db, Outbox(db)).create([document])
    documents = DocumentRepository(db)
    await documents.advance(document.id, 1, ParseStatus.EXTRACTING)
    event = DocumentUploaded(
        tenant_id="acme", kb_id=kb.id, document_id=document.id, generation=1,
        storage_key="k", filename="a.txt", content_type="text/plain",
    )  # fmt: skip
    return documents, document, event.model_dump_json().encode()


def _runner(
    documents: DocumentRepository,
    handler: Callable[[DocumentUploaded], Awaitable[StageResult]],
    captured: Captured,
    policy: StagePolicy = POLICY,
) -> StageRunner[DocumentUploaded]:
    return StageRunner(
        Stage("extract", DocumentUploaded, handler, policy),
        documents,
        captured.publish,
        captured.dead_letter,
        BACKOFF,
    )


async def test_transient_errors_are_retried_and_counted(db: Database) -> None:
    documents, document, raw = await _document(db)
    calls = 0

    async def flaky(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ServiceUnavailable("mongodb", "connection reset")
        return StageResult()

    captured = Captured()
    await _runner(documents, flaky, captured).run(raw)
    assert calls == 3
    assert captured.dead == []
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.EXTRACTING
    assert stored.attempts["extracting"] == 3


async def test_retries_run_out_then_dead_letter_and_fail(db: Database) -> None:
    documents, document, raw = await _document(db)

    async def down(event: DocumentUploaded) -> StageResult:
        raise ServiceUnavailable("gemini", "connection refused")

    captured = Captured()
    await _runner(documents, down, captured).run(raw)
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.FAILED
    assert stored.parse_error == (
        "extract failed after 3 attempts: gemini unavailable: connection refused"
    )
    assert [(body, headers["attempts"]) for body, headers in captured.dead] == [(raw, "3")]


async def test_a_permanent_error_fails_at_once(db: Database) -> None:
    documents, document, raw = await _document(db)
    calls = 0

    async def bad_input(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        raise ExtractionFailed("the PDF is encrypted; upload a copy without a password")

    captured = Captured()
    await _runner(documents, bad_input, captured).run(raw)
    assert calls == 1
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_error == "the PDF is encrypted; upload a copy without a password"
    assert captured.dead[0][1]["error"] == stored.parse_error


@pytest.mark.parametrize("raw", [b"", b"\xff\xfe", b"[]", b'{"document_id": 3}'])
async def test_malformed_messages_go_to_dead_letters(db: Database, raw: bytes) -> None:
    documents, _, _ = await _document(db)

    async def never(event: DocumentUploaded) -> StageResult:
        raise AssertionError("must not be called")

    captured = Captured()
    await _runner(documents, never, captured).run(raw)
    assert len(captured.dead) == 1
    assert captured.dead[0][1]["error"].startswith("invalid message")


async def test_when_even_the_failure_cannot_be_recorded_the_message_comes_back(
    db: Database,
) -> None:
    _, _, raw = await _document(db)

    async def down(event: DocumentUploaded) -> StageResult:
        raise ServiceUnavailable("gemini", "down")

    class Unrecordable(DocumentRepository):
        async def mark_failed(
            self, document_id: str, generation: int, reason: str, *, by_stage: bool = True
        ) -> bool:
            raise ServiceUnavailable("mongodb", "down too")

    unrecordable = Unrecordable(db)
    captured = Captured()
    with pytest.raises(ServiceUnavailable):
        await _runner(unrecordable, down, captured).run(raw)
    assert captured.dead == []


async def test_each_stage_retries_as_often_as_its_policy_says(db: Database) -> None:
    documents, document, raw = await _document(db)
    calls = 0

    async def down(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        raise ServiceUnavailable("gemini", "connection reset")

    captured = Captured()
    await _runner(documents, down, captured, StagePolicy(max_attempts=5, time_limit_s=30)).run(raw)
    assert calls == 5
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_error == (
        "extract failed after 5 attempts: gemini unavailable: connection reset"
    )


@pytest.mark.parametrize("service", ["mongodb", "kafka", "redis", "vector store"])
async def test_an_outage_of_a_platform_service_never_fails_the_document(
    db: Database, service: str
) -> None:
    documents, document, raw = await _document(db)
    calls = 0

    async def away(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        raise ServiceUnavailable(service, "connection refused")

    captured = Captured()
    with pytest.raises(ServiceUnavailable):
        await _runner(documents, away, captured).run(raw)
    assert calls == 3
    # Not acknowledged: the message comes back; the document waits in its stage.
    assert captured.dead == []
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.EXTRACTING
    assert stored.parse_error is None


async def test_a_try_past_the_time_limit_fails_the_document_and_frees_the_stage(
    db: Database,
) -> None:
    documents, document, raw = await _document(db)
    calls = 0

    async def stuck(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        await asyncio.sleep(3600)
        return StageResult()

    captured = Captured()
    started = time.monotonic()
    await _runner(documents, stuck, captured, StagePolicy(max_attempts=3, time_limit_s=0.3)).run(
        raw
    )
    # Not retried: a pathological input would only hang again.
    assert calls == 1
    assert time.monotonic() - started < 30
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.FAILED
    assert stored.parse_error is not None
    assert "gave up after 0.3 s" in stored.parse_error
    assert captured.dead[0][1]["error"] == stored.parse_error


async def test_a_slow_try_of_a_stage_that_only_writes_to_the_platform_never_fails_the_document(
    db: Database,
) -> None:
    # The index stage: a try past its time limit means MongoDB or the vector store is
    # struggling (found by the soak benchmark: under load, documents failed "the file may be
    # malformed" while a transaction kept conflicting).
    documents, document, raw = await _document(db)
    calls = 0

    async def slow(event: DocumentUploaded) -> StageResult:
        nonlocal calls
        calls += 1
        await asyncio.sleep(3600)
        return StageResult()

    policy = StagePolicy(max_attempts=3, time_limit_s=0.2)
    captured = Captured()
    runner = StageRunner(
        Stage("index", DocumentUploaded, slow, policy, slow_means_outage=True),
        documents,
        captured.publish,
        captured.dead_letter,
        BACKOFF,
    )
    with pytest.raises(ServiceUnavailable):
        await runner.run(raw)
    # Retried as an outage is, then not acknowledged: the message comes back.
    assert calls == 3
    assert captured.dead == []
    stored = await documents.find(document.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.EXTRACTING
    assert stored.parse_error is None


async def test_a_document_stage_skips_messages_of_documents_that_moved_on(db: Database) -> None:
    documents, document, raw = await _document(db)
    seen: list[str] = []

    async def handler(event: DocumentUploaded, current: Document) -> StageResult:
        seen.append(current.id)
        return StageResult()

    stage = document_stage(
        "extract", DocumentUploaded, ParseStatus.EXTRACTING, handler, documents, POLICY
    )
    captured = Captured()
    await StageRunner(stage, documents, captured.publish, captured.dead_letter, BACKOFF).run(raw)
    assert seen == [document.id]
    # A re-index starts generation 2: the old message is skipped, the handler never called.
    await DocumentLifecycle(db.client, db, Outbox(db)).restart(document.id)
    await StageRunner(stage, documents, captured.publish, captured.dead_letter, BACKOFF).run(raw)
    assert seen == [document.id]
    assert captured.dead == []

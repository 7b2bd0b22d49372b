"""Knowledge bases, documents and tokens against the real MongoDB-protocol server."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from core.errors import NotFound
from devstack.launcher import LocalServices
from infra.mongo.client import DOCUMENTS, OUTBOX, SOURCES, Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.indexes import ensure_indexes
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle, Finished
from infra.mongo.outbox import Outbox
from infra.mongo.token_repository import TokenRepository
from schemas.domain import (
    ChunkingProgress,
    Document,
    KbStatus,
    ParseStatus,
    Role,
    file_source_key,
    utcnow,
)
from tests.conftest import MongoCommands, settings_for
from tests.factories import make_document


def _document(tenant: str, kb_id: str) -> Document:
    return make_document(tenant, kb_id)


async def _stored(db: Database, tenant: str = "acme") -> tuple[DocumentRepository, Document]:
    """A queued document stored through the lifecycle, in a KB of its own."""
    kb = await KnowledgeBaseRepository(db).create(tenant, "KB", "", "en")
    document = _document(tenant, kb.id)
    await DocumentLifecycle(db.client, db, Outbox(db)).create([document])
    return DocumentRepository(db), document


async def test_knowledge_bases_are_scoped_to_their_tenant(db: Database) -> None:
    await ensure_indexes(db)
    kbs = KnowledgeBaseRepository(db)
    mine = await kbs.create("acme", "Handbook", "HR policies", "en")
    await kbs.create("other", "Theirs", "", "en")
    assert mine.id.startswith("kb_")
    assert [kb.id for kb in await kbs.list_all("acme")] == [mine.id]
    assert (await kbs.get("acme", mine.id)).name == "Handbook"
    with pytest.raises(NotFound):
        await kbs.get("other", mine.id)
    with pytest.raises(NotFound):
        await kbs.update("other", mine.id, {"name": "stolen"})


async def test_updates_bump_the_revision_and_new_documents_are_counted(db: Database) -> None:
    kbs = KnowledgeBaseRepository(db)
    kb = await kbs.create("acme", "Handbook", "", "en")
    renamed = await kbs.update("acme", kb.id, {"name": "Staff handbook"})
    assert renamed.name == "Staff handbook"
    assert renamed.revision == kb.revision + 1
    await DocumentLifecycle(db.client, db, Outbox(db)).create([_document("acme", kb.id)])
    (counted,) = await kbs.counted([await kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 0)
    # A queued document changes nothing a search shows: cached answers stay valid.
    assert counted.revision == renamed.revision


async def test_active_ids_drops_disabled_foreign_and_unknown(db: Database) -> None:
    kbs = KnowledgeBaseRepository(db)
    a = await kbs.create("acme", "A", "", "en")
    b = await kbs.create("acme", "B", "", "en")
    foreign = await kbs.create("other", "C", "", "en")
    await kbs.update("acme", b.id, {"status": KbStatus.DISABLED})
    ids = await kbs.active_ids("acme", [b.id, a.id, foreign.id, "kb_missing", a.id])
    assert ids == [a.id]


async def test_advance_moves_forward_once_and_allows_redelivery(db: Database) -> None:
    documents, doc = await _stored(db)
    entered = await documents.advance(doc.id, 1, ParseStatus.EXTRACTING)
    assert entered is not None
    assert entered.parse_status is ParseStatus.EXTRACTING
    assert entered.attempts == {"extracting": 1}
    # A redelivered message after a crash finds the document current and leaves it be.
    again = await documents.advance(doc.id, 1, ParseStatus.EXTRACTING)
    assert again is not None
    assert again.attempts == {"extracting": 1}
    # A later stage may already have taken it further: no step back.
    assert await documents.advance(doc.id, 1, ParseStatus.EMBEDDING) is not None
    behind = await documents.advance(doc.id, 1, ParseStatus.CHUNKING)
    assert behind is not None
    assert behind.parse_status is ParseStatus.EMBEDDING
    # A stale generation cannot.
    assert await documents.advance(doc.id, 2, ParseStatus.EXTRACTING) is None


async def test_concurrent_messages_enter_a_stage_once_and_versions_never_repeat(
    db: Database,
) -> None:
    documents, doc = await _stored(db)
    entered = await asyncio.gather(
        *(documents.advance(doc.id, 1, ParseStatus.EXTRACTING) for _ in range(10))
    )
    assert all(d is not None and d.parse_status is ParseStatus.EXTRACTING for d in entered)
    current = await documents.find(doc.id)
    assert current is not None
    assert current.attempts == {"extracting": 1}
    # New versions of one file created at once: each its own number, in transactions that
    # conflict on the version line and are run again.
    lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
    started = await asyncio.gather(
        *(lifecycle.create([_document(doc.tenant_id, doc.kb_id)], number=True) for _ in range(20))
    )
    versions = [s.documents[0].version for s in started]
    assert sorted(versions) == list(range(1, 21))
    stored = [await documents.find(s.documents[0].id) for s in started]
    assert sorted(d.version for d in stored if d is not None) == sorted(versions)


async def test_a_batch_of_documents_is_numbered_and_created_in_one_transaction(
    db: Database, local_services: LocalServices
) -> None:
    commands = MongoCommands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        settings_for(local_services).mongo.url, event_listeners=[commands]
    )

    def on_line(key: str) -> Document:
        return _document("acme", "kb").model_copy(update={"source_key": key})

    try:
        lifecycle = DocumentLifecycle(client, client[db.name], Outbox(client[db.name]))
        (first,) = (await lifecycle.create([on_line("record:a")], number=True)).documents
        assert first.version == 1
        commands.sent.clear()
        keys = ["record:a", "record:b", "record:a", *(f"record:{n}" for n in range(50))]
        started = await lifecycle.create([on_line(key) for key in keys], number=True)
        # A line named twice gets two numbers in order; one seen before goes on from there.
        versions = [document.version for document in started.documents]
        assert versions[:3] == [2, 1, 3]
        assert versions[3:] == [1] * 50
        sent = [name for name, _, _ in commands.sent]
        assert sent == ["update", "find", "insert", "insert", "commitTransaction"]
        # As stored, each with its event.
        stored = DocumentRepository(client[db.name])
        for document, event in zip(started.documents, started.events, strict=True):
            found = await stored.find(document.id)
            assert found is not None
            assert found.version == document.version
            assert event.document_id == document.id
        assert (await lifecycle.create([], number=True)).documents == []
    finally:
        await client.close()


async def test_per_message_writes_use_no_find_and_modify(
    db: Database, local_services: LocalServices
) -> None:
    # The local MongoDB server scans the whole collection for each findAndModify: a pipeline
    # that sent one per message to a collection that grows with the documents would slow down
    # with every document stored. (A KB's revision is raised by one: KBs are few.)
    commands = MongoCommands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        settings_for(local_services).mongo.url, event_listeners=[commands]
    )
    watched = client[db.name]
    try:
        kb = await KnowledgeBaseRepository(watched).create("acme", "KB", "", "en")
        lifecycle = DocumentLifecycle(client, watched, Outbox(watched))
        document = _document("acme", kb.id)
        await lifecycle.create([document], number=True)
        await _ready_to_finish(watched, document)
        assert isinstance(await lifecycle.finish(document.id, 1), Finished)
        assert await lifecycle.remove(document.id) is not None
        growing = (DOCUMENTS, SOURCES, OUTBOX)
        assert [
            (name, collection)
            for name, collection, _ in commands.sent
            if name == "findAndModify" and collection in growing
        ] == []
        kbs = KnowledgeBaseRepository(watched)
        assert (await kbs.counted([await kbs.get("acme", kb.id)]))[0].document_count == 0
    finally:
        await client.close()


async def test_batches_are_counted_once_and_the_document_finishes_once(db: Database) -> None:
    documents, doc = await _stored(db)
    for status in (ParseStatus.EXTRACTING, ParseStatus.CHUNKING):
        assert await documents.advance(doc.id, 1, status) is not None
    assert await documents.advance(doc.id, 1, ParseStatus.EMBEDDING) is not None
    for batch, size in ((0, 32), (2, 6), (2, 6), (0, 32)):
        assert await documents.record_batch_embedded(doc.id, 1, batch, size)
    progress = await documents.find(doc.id)
    assert progress is not None
    assert progress.chunks_embedded == 32 + 6
    assert await documents.advance(doc.id, 1, ParseStatus.INDEXING) is not None
    # Embedding of a later batch may still run while indexing started: no step back.
    embedding_again = await documents.advance(doc.id, 1, ParseStatus.EMBEDDING)
    assert embedding_again is not None
    assert embedding_again.parse_status is ParseStatus.INDEXING
    assert await documents.record_batch_embedded(doc.id, 1, 1, 32)
    # The total is unknown until the last part is chunked.
    assert await documents.record_batch_indexed(doc.id, 1, 0, 32) == (1, None)
    assert await documents.record_chunking(
        doc.id, 1, chunk_count=70, text_char_count=9000, batch_count=3
    )
    assert await documents.record_batch_indexed(doc.id, 1, 0, 32) == (1, 3)
    assert await documents.record_batch_indexed(doc.id, 1, 1, 32) == (2, 3)
    assert await documents.record_batch_indexed(doc.id, 1, 2, 6) == (3, 3)
    lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
    results = await asyncio.gather(*(lifecycle.finish(doc.id, 1) for _ in range(5)))
    winners = [r for r in results if isinstance(r, Finished)]
    assert len(winners) == 1
    assert results.count(None) == 4
    assert winners[0].document.parse_status is ParseStatus.INDEXED
    assert winners[0].retired == []
    kbs = KnowledgeBaseRepository(db)
    (kb,) = await kbs.counted([await kbs.get("acme", doc.kb_id)])
    assert (kb.document_count, kb.chunk_count) == (1, 70)
    stored = await documents.find(doc.id)
    assert stored is not None
    assert stored.indexed_chunk_count == 70
    assert stored.chunks_embedded == 70


async def test_chunking_progress_advances_one_part_at_a_time(db: Database) -> None:
    documents, doc = await _stored(db)
    start = await documents.advance(doc.id, 1, ParseStatus.CHUNKING)
    assert start is not None
    assert start.chunker is None  # not begun
    first = ChunkingProgress(next_part=1, next_batch=2, state={"pending": "tail", "offset": 9})
    assert await documents.save_chunking_progress(doc.id, 1, 0, first)
    # Saving part 0 again (a replay) does not move anything back.
    assert not await documents.save_chunking_progress(doc.id, 1, 0, ChunkingProgress())
    again = await documents.advance(doc.id, 1, ParseStatus.CHUNKING, first=False)
    assert again is not None
    assert again.chunker == first
    # A new run begins with no progress.
    await DocumentLifecycle(db.client, db, Outbox(db)).restart(doc.id)
    restarted = await documents.advance(doc.id, 2, ParseStatus.CHUNKING)
    assert restarted is not None
    assert restarted.chunker is None


async def test_failure_reason_is_truncated_and_never_overwrites_success(db: Database) -> None:
    _, doc = await _stored(db)
    documents = DocumentRepository(db, parse_error_max_chars=60)
    assert await documents.mark_failed(doc.id, 1, "the PDF is encrypted; " + "x" * 200)
    failed = await documents.find(doc.id)
    assert failed is not None
    assert failed.parse_status is ParseStatus.FAILED
    assert failed.parse_error is not None
    assert len(failed.parse_error) == 60
    assert failed.parse_error.startswith("the PDF is encrypted")


async def test_begin_delete_retires_the_generation(db: Database) -> None:
    documents, doc = await _stored(db)
    before = await documents.begin_delete("acme", doc.kb_id, doc.id)
    assert before.generation == 1
    # Everything the pipeline still has in flight for generation 1 now misses.
    assert await documents.advance(doc.id, 1, ParseStatus.EXTRACTING) is None
    assert not await documents.record_batch_embedded(doc.id, 1, 0, 32)
    assert await documents.record_batch_indexed(doc.id, 1, 0, 32) is None
    with pytest.raises(NotFound):
        await documents.begin_delete("other", doc.kb_id, doc.id)
    lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
    removed = await lifecycle.remove(doc.id)
    assert removed is not None
    assert await lifecycle.remove(doc.id) is None
    kbs = KnowledgeBaseRepository(db)
    (kb,) = await kbs.counted([await kbs.get("acme", doc.kb_id)])
    assert kb.document_count == 0


async def test_tokens_resolve_to_their_tenant_and_role(db: Database) -> None:
    tokens = TokenRepository(db, bootstrap_token="boot-secret", bootstrap_tenant="default")
    boot = await tokens.resolve("boot-secret")
    assert boot is not None
    assert (boot.tenant_id, boot.role) == ("default", Role.ADMIN)
    info, token = await tokens.issue("acme", Role.USER, "a reader", user_id="alice")
    token_id = info.id
    resolved = await tokens.resolve(token)
    assert resolved is not None
    assert (resolved.tenant_id, resolved.role, resolved.token_id, resolved.user_id) == (
        "acme",
        Role.USER,
        token_id,
        "alice",
    )
    assert [t.id for t in await tokens.list_all("acme")] == [token_id]
    assert await tokens.resolve("not-a-token") is None
    # Only a hash is stored.
    stored = await db["api_tokens"].find_one({"token_id": token_id})
    assert stored is not None
    assert token not in str(stored)
    # A revoked token stands for nobody.
    assert await tokens.revoke("acme", token_id)
    assert await tokens.resolve(token) is None
    assert not await tokens.revoke("acme", token_id)


async def test_an_expired_token_stands_for_nobody(db: Database) -> None:
    tokens = TokenRepository(db, bootstrap_token="", bootstrap_tenant="default")
    now = utcnow()
    _, expired = await tokens.issue(
        "acme", Role.ADMIN, "old", expires_at=now - timedelta(seconds=1)
    )
    _, valid = await tokens.issue("acme", Role.ADMIN, "new", expires_at=now + timedelta(hours=1))
    assert await tokens.resolve(expired) is None
    principal = await tokens.resolve(valid)
    assert principal is not None
    assert principal.tenant_id == "acme"


async def test_writes_to_many_documents_do_not_wait_forever_on_a_transaction(
    local_services: LocalServices, db: Database
) -> None:
    """A KB's retirement, a governance change and a sync's tagging while a transaction holds
    one of their documents: everything ends once the transaction has written again and
    committed (the local server's multi-document update used to hang both)."""
    _, document = await _stored(db)
    docs = db["knowledge_documents"]
    governance = document.governance.model_copy(update={"tags": ["moved"]})
    # The three writes go through a client of their own, whose commands are seen as sent.
    commands = MongoCommands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        settings_for(local_services).mongo.url, event_listeners=[commands]
    )
    documents = DocumentRepository(client[db.name])
    try:
        async with db.client.start_session() as session:
            await session.start_transaction()
            await docs.update_one(
                {"_id": document.id}, {"$set": {"title": "held"}}, session=session
            )
            writes = asyncio.gather(
                documents.set_governance(
                    document.tenant_id, document.knowledge_item_id, governance
                ),
                documents.mark_synced([document.id], "crm", "run-1"),
                documents.begin_delete_kb(document.tenant_id, document.kb_id),
            )
            async with asyncio.timeout(20):
                # Until each has sent its update of the held document (which waits on the
                # transaction), unless it is already done.
                while (
                    not writes.done()
                    and sum(
                        (name, collection) == ("update", "knowledge_documents")
                        for name, collection, _ in commands.sent
                    )
                    < 3
                ):
                    await asyncio.sleep(0.02)
                await docs.update_one({"_id": document.id}, {"$inc": {"x": 1}}, session=session)
                await session.commit_transaction()
                await writes
    finally:
        await client.close()
    stored = await docs.find_one({"_id": document.id})
    assert stored is not None
    assert (stored["title"], stored["sync_run"], stored["parse_status"]) == (
        "held",
        "run-1",
        ParseStatus.DELETING.value,
    )
    assert stored["governance"]["tags"] == ["moved"]


class CutShort(DocumentLifecycle):
    """Its transactions make their writes and then never commit, as a process killed at that
    moment leaves them: the server holds such a transaction open, with what it wrote, until it
    reaps it (after a minute)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db.client, db, Outbox(db))
        self.written = asyncio.Event()

    async def _transaction(self, work: Any) -> Any:
        async def hanging(session: Any, *rest: Any) -> Any:
            result = await work(session, *rest)
            self.written.set()
            await asyncio.Event().wait()
            return result

        return await super()._transaction(hanging)


async def _ready_to_finish(db: Database, document: Document) -> None:
    """Takes a stored document through its stages to the point of finishing (3 chunks)."""
    documents = DocumentRepository(db)
    for status in (ParseStatus.EXTRACTING, ParseStatus.CHUNKING):
        assert await documents.advance(document.id, 1, status) is not None
    assert await documents.record_chunking(
        document.id, 1, chunk_count=3, text_char_count=300, batch_count=1
    )
    assert await documents.advance(document.id, 1, ParseStatus.EMBEDDING) is not None
    assert await documents.record_batch_embedded(document.id, 1, 0, 3)
    assert await documents.advance(document.id, 1, ParseStatus.INDEXING) is not None
    assert await documents.record_batch_indexed(document.id, 1, 0, 3) == (1, 1)


async def test_a_change_cut_short_inside_its_transaction_holds_up_no_other_document(
    db: Database,
) -> None:
    # A process killed while it finished one document (an API or index worker SIGKILLed in the
    # chaos soak) held that KB's other documents for the minute the server keeps its
    # transaction open: the transaction had written the KB's counts.
    await ensure_indexes(db)
    kbs = KnowledgeBaseRepository(db)
    kb = await kbs.create("acme", "KB", "", "en")
    lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
    cut, other, removed, added = (
        make_document("acme", kb.id, filename=name, source_key=file_source_key(name))
        for name in ("cut.txt", "other.txt", "removed.txt", "added.txt")
    )
    await lifecycle.create([cut, other, removed])
    for document in (cut, other):
        await _ready_to_finish(db, document)
    killed = CutShort(db)
    hanging = asyncio.create_task(killed.finish(cut.id, 1))
    try:
        await asyncio.wait_for(killed.written.wait(), 10)
        # Every other change of the KB goes on at once while that transaction stays open (the
        # bound is far below the minute a server holds it; these take milliseconds).
        async with asyncio.timeout(20):
            # As the index stage finishes a document: the KB's revision, then its status.
            touched = await lifecycle.touch(kb.id)
            assert isinstance(await lifecycle.finish(other.id, 1), Finished)
            assert touched[kb.id] > kb.revision
            assert await lifecycle.remove(removed.id) is not None
            await lifecycle.create([added])
            (counted,) = await kbs.counted([await kbs.get("acme", kb.id)])
        assert not hanging.done()
    finally:
        hanging.cancel()
    # The cut-short change never happened; the counts are the documents'.
    assert (counted.document_count, counted.chunk_count) == (3, 3)
    stored = await DocumentRepository(db).find(cut.id)
    assert stored is not None
    assert stored.parse_status is ParseStatus.INDEXING


async def test_deleting_a_kb_again_leaves_the_documents_it_already_retired_alone(
    db: Database,
) -> None:
    # A KB's delete cut short (the request's bound, on hundreds of documents) is finished by
    # deleting again: the second pass does not write every document a second time.
    documents, document = await _stored(db)
    first = await documents.begin_delete_kb(document.tenant_id, document.kb_id)
    again = await documents.begin_delete_kb(document.tenant_id, document.kb_id)
    assert [d.id for d in again] == [d.id for d in first] == [document.id]
    assert first[0].parse_status is again[0].parse_status is ParseStatus.DELETING
    assert again[0].generation == first[0].generation == document.generation + 1

"""The stages' messages worked at the same moment share their round trips: entering a status,
recording a batch, reading a document, raising a KB's revision, finishing, reading originals,
forgetting sent events, and the embed stage's cache and model call (real MongoDB; about 3 s).
Each answer is still the caller's own: a stale or missing document gets its None, a replay its
None, a missing file its NotFound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from core.errors import NotFound
from core.governance import Governance, Visibility
from core.sparse import SparseEncoder
from devstack.launcher import LocalServices
from infra.embedding.hashed import HashedEmbedder
from infra.mongo.blob_store import BlobStore, NewFile
from infra.mongo.client import Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.embedding_cache import EmbeddingCache
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle, Finished, Superseded
from infra.mongo.outbox import EventSender, Outbox, Pending
from infra.settings.embedding import EmbeddingSettings
from infra.settings.stages import StagePolicy
from schemas.domain import ChunkRecord, Document, ParseStatus, record_source_key
from schemas.events import ChunkBatchEmbedded, ChunkBatchReady, DocumentUploaded
from tests.conftest import MongoCommands, counted_database
from tests.factories import make_document
from tests.generations import OneModel
from workers.embed.handler import EmbedHandler
from workers.ports import StageResult
from workers.runtime import carried_stage

ENTERING = ParseStatus.EXTRACTING


async def _queued(db: Database, count: int, kb_id: str = "kb") -> list[Document]:
    """`count` documents just accepted (queued, generation 1)."""
    documents = [
        make_document("acme", kb_id, source_key=record_source_key(f"r{n}")) for n in range(count)
    ]
    await DocumentLifecycle(db.client, db, Outbox(db)).create(documents)
    return documents


def _sent(commands: MongoCommands) -> list[str]:
    """The commands sent since the last look, by name (then forgotten)."""
    names = [name for name, _, _ in commands.sent]
    commands.sent.clear()
    return names


async def test_messages_entering_at_once_share_one_write_and_one_read(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        documents = DocumentRepository(db)
        queued = await _queued(db, 6)
        _sent(commands)
        entered = await asyncio.gather(
            *(documents.advance(d.id, 1, ENTERING) for d in queued),
            documents.advance(queued[0].id, 2, ENTERING),  # a stale generation
            documents.advance("doc_missing", 1, ENTERING),
        )
        assert _sent(commands) == ["update", "find"]
        assert [d.id if d else None for d in entered] == [*(d.id for d in queued), None, None]
        assert {d.parse_status for d in entered if d} == {ENTERING}
        # The move counted once per document, as when each message entered alone.
        assert {d.attempts[ENTERING.value] for d in entered if d} == {1}
        # A later batch's message (not `first`) reads first, and moves its document only if
        # it is still behind: here one of two.
        late = await asyncio.gather(
            documents.advance(queued[0].id, 1, ENTERING, first=False),
            documents.advance(queued[1].id, 1, ParseStatus.CHUNKING, first=False),
        )
        assert _sent(commands) == ["find", "update", "find"]
        assert [d.parse_status if d else None for d in late] == [ENTERING, ParseStatus.CHUNKING]
        alone = await documents.advance(queued[2].id, 1, ENTERING)
        assert alone is not None
        assert alone.parse_status is ENTERING
        assert _sent(commands) == ["update", "find"]


async def test_opening_messages_that_carry_their_run_enter_in_one_write_and_read_nothing(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        documents = DocumentRepository(db)
        queued = await _queued(db, 4)
        given: list[Document | None] = []

        async def handler(_: DocumentUploaded, document: Document | None) -> StageResult:
            given.append(document)
            return StageResult()

        stage = carried_stage(
            "extract", DocumentUploaded, ENTERING, handler, documents, StagePolicy()
        )
        events = [DocumentUploaded.of(d) for d in queued]
        assert all(event.carries_run for event in events)
        _sent(commands)
        results = await asyncio.gather(*(stage.handler(event) for event in events[:3]))
        assert _sent(commands) == ["update"]
        assert given == [None, None, None]
        assert not any(result.skipped for result in results)
        for document in queued[:3]:
            stored = await documents.find(document.id)
            assert stored is not None
            assert stored.parse_status is ENTERING
            assert stored.attempts[ENTERING.value] == 1
        # A replay misses the move: the document is read, and the handler gets it.
        _sent(commands)
        given.clear()
        await stage.handler(events[0])
        assert _sent(commands) == ["update", "find"]
        assert [d.id if d else None for d in given] == [queued[0].id]
        # A replay and a stale message sharing the write with a new one: each still told
        # apart (the new one entered, the stale one skipped).
        given.clear()
        stale = events[3].model_copy(update={"generation": 2})
        outcomes = await asyncio.gather(
            stage.handler(events[1]), stage.handler(stale), stage.handler(events[3])
        )
        assert [o.skipped for o in outcomes] == [False, True, False]
        assert sorted(d.id for d in given if d) == sorted([queued[1].id, queued[3].id])
        stored = await documents.find(queued[3].id)
        assert stored is not None
        assert stored.parse_status is ENTERING
        assert stored.attempts[ENTERING.value] == 1
        # An event of before the run was carried: the message reads the document.
        _sent(commands)
        given.clear()
        old = events[2].model_copy(update={"title": None})
        assert not old.carries_run
        await stage.handler(old)
        assert _sent(commands) == ["update", "find"]
        assert [d.id if d else None for d in given] == [queued[2].id]


async def test_batch_records_at_once_share_one_write_and_each_says_whether_it_was_made(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        documents = DocumentRepository(db)
        queued = await _queued(db, 5)
        _sent(commands)
        made = await asyncio.gather(
            *(documents.record_batch_embedded(d.id, 1, 0, 32) for d in queued)
        )
        assert made == [True] * 5
        assert _sent(commands) == ["update"]
        # One of a batch stale: the others are still made, and each knows which it was.
        mixed = await asyncio.gather(
            documents.record_batch_embedded(queued[0].id, 1, 1, 32),
            documents.record_batch_embedded(queued[1].id, 7, 1, 32),
            documents.record_chunking(
                queued[2].id, 1, chunk_count=40, text_char_count=5000, batch_count=2
            ),
        )
        assert list(mixed) == [True, False, True]
        found = await asyncio.gather(*(documents.find(d.id) for d in queued))
        stored = {d.id: d for d in found if d is not None}
        assert stored[queued[0].id].chunks_embedded == 64
        assert stored[queued[1].id].chunks_embedded == 32
        assert stored[queued[2].id].chunk_count == 40


async def _numbered(lifecycle: DocumentLifecycle, kb_id: str, name: str) -> Document:
    """A new record's document, numbered and created as the intake does."""
    document = make_document("acme", kb_id, source_key=record_source_key(name))
    return (await lifecycle.create([document], number=True)).documents[0]


async def _stored_now(db: Database, document_id: str) -> Document:
    """The document as stored now."""
    document = await DocumentRepository(db).find(document_id)
    assert document is not None
    return document


async def _ready(db: Database, documents: list[Document]) -> None:
    """Takes stored documents to the point of finishing (one batch of 3 chunks each)."""
    repository = DocumentRepository(db)
    for document in documents:
        for status in (ParseStatus.EXTRACTING, ParseStatus.CHUNKING):
            assert await repository.advance(document.id, 1, status)
        assert await repository.record_chunking(
            document.id, 1, chunk_count=3, text_char_count=300, batch_count=1
        )
        for status in (ParseStatus.EMBEDDING, ParseStatus.INDEXING):
            assert await repository.advance(document.id, 1, status)
        assert await repository.record_batch_indexed(document.id, 1, 0, 3) == (1, 1)


async def test_runs_finishing_at_once_share_one_transaction(local_services: LocalServices) -> None:
    async with counted_database(local_services) as (db, commands):
        lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
        kb = await KnowledgeBaseRepository(db).create("acme", "KB", "", "en")
        line = record_source_key("manual")
        first = make_document("acme", kb.id, source_key=line, version=1)
        fresh = [
            make_document("acme", kb.id, source_key=record_source_key(f"n{n}")) for n in range(3)
        ]
        await lifecycle.create([first, *fresh])
        await _ready(db, [first])
        assert isinstance(await lifecycle.finish(first.id, 1), Finished)
        # Two newer versions of the manual finish together with three first versions.
        second, third = (
            make_document("acme", kb.id, source_key=line, version=version) for version in (2, 3)
        )
        await lifecycle.create([second, third])
        await _ready(db, [second, third, *fresh])
        _sent(commands)
        outcomes = await asyncio.gather(
            *(lifecycle.finish(d.id, 1) for d in (third, second, *fresh)),
            lifecycle.finish(fresh[0].id, 1),  # a replay in the same batch
            lifecycle.finish(first.id, 1),  # a replay of a finished run
        )
        sent = _sent(commands)
        assert sent.count("commitTransaction") == 1
        assert len(sent) <= 8, sent
        assert all(isinstance(o, Finished) for o in outcomes[:5]), outcomes
        assert outcomes[5:] == [None, None]
        # In version order, as one after the other: the third retires the first and second.
        by_id = {o.document.id: o for o in outcomes[:5] if isinstance(o, Finished)}
        assert {d.id for d in by_id[third.id].retired} == {first.id, second.id}
        assert {d.id for d in by_id[second.id].retired} == {first.id}
        assert await lifecycle.live_version(kb.id, line) == 3
        stored = DocumentRepository(db)
        assert await stored.find(first.id) is None
        assert await stored.find(second.id) is None
        for document in (third, *fresh):
            now = await stored.find(document.id)
            assert now is not None
            assert now.parse_status is ParseStatus.INDEXED
        # A first version alone (numbered as the intake numbers it, which starts its line):
        # read, its line moved, marked indexed, committed.
        lone = await _numbered(lifecycle, kb.id, "lone")
        await _ready(db, [lone])
        _sent(commands)
        assert isinstance(await lifecycle.finish(lone.id, 1), Finished)
        assert _sent(commands) == ["find", "update", "update", "commitTransaction"]
        assert await lifecycle.live_version(kb.id, lone.source_key) == lone.version == 1
        # A run still stored as the index stage read it is finished reading nothing (a
        # conditional write of the document and of its line, and commit).
        as_read = [await _numbered(lifecycle, kb.id, f"read{n}") for n in range(2)]
        await _ready(db, as_read)
        as_read = [await _stored_now(db, d.id) for d in as_read]
        _sent(commands)
        outcomes = await asyncio.gather(*(lifecycle.finish_as_read(d) for d in as_read))
        assert _sent(commands) == ["update", "update", "commitTransaction"]
        assert [o.document.id if o else None for o in outcomes] == [d.id for d in as_read]
        for document in as_read:
            now = await _stored_now(db, document.id)
            assert now.parse_status is ParseStatus.INDEXED
            assert now.indexed_chunk_count == 3
            assert await lifecycle.live_version(kb.id, document.source_key) == 1
        # Stored otherwise than read (its readers changed since): nothing is done, and the
        # caller finishes it from what is stored.
        changed = await _numbered(lifecycle, kb.id, "changed")
        await _ready(db, [changed])
        read = await _stored_now(db, changed.id)
        only_ann = Governance(visibility_mode=Visibility.RESTRICTED, user_grants=["ann"])
        await DocumentRepository(db).set_governance("acme", changed.id, only_ann)
        _sent(commands)
        assert await lifecycle.finish_as_read(read) is None
        assert _sent(commands) == ["update", "abortTransaction"]
        assert (await _stored_now(db, changed.id)).parse_status is ParseStatus.INDEXING
        finished = await lifecycle.finish(changed.id, 1)
        assert isinstance(finished, Finished)
        assert finished.document.readers == only_ann.readers()
        # A replay, as read or not, is told it did nothing.
        assert await lifecycle.finish_as_read(finished.document) is None
        assert await lifecycle.finish(changed.id, 1) is None
        # A version finishing after a newer one went live is superseded, in a batch as alone.
        late = make_document("acme", kb.id, source_key=line, version=2)
        await lifecycle.create([late])
        await _ready(db, [late])
        (outcome,) = await asyncio.gather(lifecycle.finish(late.id, 1))
        assert isinstance(outcome, Superseded)


async def test_revisions_raised_at_once_are_one_raise_of_each_kb(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        kbs = KnowledgeBaseRepository(db)
        one, other = [await kbs.create("acme", name, "", "en") for name in ("one", "other")]
        lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
        _sent(commands)
        touched = await asyncio.gather(
            lifecycle.touch(one.id), lifecycle.touch(other.id), lifecycle.touch(one.id)
        )
        assert _sent(commands) == ["findAndModify", "findAndModify"]  # one for each KB
        assert touched[0] == touched[2] == {one.id: one.revision + 1}
        assert touched[1] == {other.id: other.revision + 1}
        assert await lifecycle.touch("kb_gone") == {}
        # Each caller's change came before the shared raise: the next one moves on again.
        assert (await lifecycle.touch(one.id))[one.id] == one.revision + 2


async def test_originals_read_at_once_share_two_reads(local_services: LocalServices) -> None:
    async with counted_database(local_services) as (db, commands):
        blobs = BlobStore(db)
        large = bytes(range(256)) * 2_500  # three GridFS chunks
        files = [
            NewFile(b"# one", "one.md", "d1"),
            NewFile(large, "l.md", "d2"),
            NewFile(b"", "e.md", "d3"),
        ]
        keys = [stored.storage_key for stored in await blobs.store_originals(files)]
        gone = (await blobs.store_originals([NewFile(b"gone", "g.md", "d4")]))[0].storage_key
        await blobs.delete(gone)
        _sent(commands)
        read = await asyncio.gather(
            *(blobs.read(key) for key in [*keys, gone]), return_exceptions=True
        )
        assert read[:3] == [file.data for file in files]
        assert isinstance(read[3], NotFound)
        assert _sent(commands) == ["find", "find"]
        with pytest.raises(NotFound):
            await blobs.read("gridfs:originals/not-an-id")


class CountedEmbedder(HashedEmbedder):
    """The hashed embedder, noting the texts of each call."""

    def __init__(self) -> None:
        super().__init__(EmbeddingSettings(provider="hashed", dimensions=64))
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        return super().embed_documents(texts)


def _batch(document: Document, texts: list[str]) -> ChunkBatchReady:
    chunks = [
        ChunkRecord(chunk_index=i, text=text, start=0, end=len(text))
        for i, text in enumerate(texts)
    ]
    return ChunkBatchReady(
        tenant_id=document.tenant_id,
        kb_id=document.kb_id,
        document_id=document.id,
        generation=1,
        batch_index=0,
        last=True,
        chunks=chunks,
    )


async def test_batches_embedded_at_once_share_one_model_call_and_one_cache_round_trip(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        documents = DocumentRepository(db)
        embedder = CountedEmbedder()
        handler = EmbedHandler(documents, OneModel(embedder), EmbeddingCache(db), SparseEncoder())
        queued = await _queued(db, 3)
        texts = [[f"alpha {n}", f"beta {n}"] for n in range(3)]
        texts[2] = ["alpha 0", "gamma"]  # one text already in another batch of the moment
        _sent(commands)
        results = await asyncio.gather(
            *(handler(_batch(d, t), d) for d, t in zip(queued, texts, strict=True))
        )
        assert embedder.calls == [[text for batch in texts for text in batch]]
        # The cache read, its write, the three batches' records.
        assert _sent(commands) == ["find", "insert", "update"]
        for result, batch in zip(results, texts, strict=True):
            (event,) = result.publish
            assert isinstance(event, ChunkBatchEmbedded)
            expected = embedder.embed_documents(batch)
            assert np.allclose(event.vectors(), expected)
        # Embedded again: every vector comes from the cache, no model call.
        embedder.calls.clear()
        await handler(_batch(queued[0], texts[0]), queued[0])
        assert embedder.calls == []


async def test_events_sent_one_after_another_are_forgotten_together(
    local_services: LocalServices,
) -> None:
    # As uploads one after the other send their events: each sends at once, and the entries
    # Kafka acknowledged within a second of each other leave the outbox in one delete.
    async with counted_database(local_services) as (db, commands):
        outbox = Outbox(db)
        published: list[bytes] = []

        async def send(topic: str, key: bytes, value: bytes) -> None:
            published.append(key)

        events = EventSender(outbox, send, timeout_s=5, forget_wait_s=1.0)
        entries = [Pending("documents.uploaded.v1", f"d{n}/1".encode(), b"{}") for n in range(5)]
        await outbox.add_now(entries)
        _sent(commands)
        for entry in entries:
            await events.send_now([entry])
        assert published == [entry.key for entry in entries]
        await events.forgotten()
        assert _sent(commands) == ["delete"]
        assert await outbox.count() == 0

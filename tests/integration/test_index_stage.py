"""The index stage against Mongo and both vector stores: all-or-nothing, idempotent, versioned."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from core.errors import PermanentError, ServiceUnavailable
from core.filters import SearchScope, chunks_of_document, chunks_where
from core.governance import Governance, Visibility
from infra.mongo.blob_store import BlobStore
from infra.mongo.client import Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle, Finished, KbRevisions, Superseded
from infra.mongo.outbox import Outbox
from infra.settings.ingest import IngestSettings
from infra.settings.stages import StagePolicy
from infra.vectorstore.base import PublishedDocument, VectorQuery, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.qdrant_server import QdrantServerStore
from schemas.domain import ChunkRecord, Document, ParseStatus, file_source_key
from schemas.events import ChunkBatchEmbedded, Event
from services.removal_service import RemovalService
from tests.factories import make_document
from tests.generations import hashed_encoders, only_generation
from workers.index.handler import IndexHandler
from workers.runtime import StageRunner, document_stage

DIM = 8


@pytest.fixture(params=["qdrant", "edge"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """The production store (Qdrant API) and the local default's."""
    opened: VectorStore
    if request.param == "qdrant":
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", DIM)
    else:
        opened = EdgeVectorStore(tmp_path / "v", DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


class RecordedRevisions:
    """What the stage tells the search caches: the KB revisions it made."""

    def __init__(self) -> None:
        self.told: dict[str, int] = {}

    async def kbs_changed(self, revisions: KbRevisions) -> None:
        for kb_id, revision in revisions.items():
            self.told[kb_id] = max(revision, self.told.get(kb_id, 0))


class FinishFails(DocumentLifecycle):
    """The lifecycle, with the step that finishes a published run in MongoDB failing for
    good (as a status write after the publication that cannot succeed)."""

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        raise PermanentError("the version could not be marked live")

    async def finish_as_read(self, document: Document) -> Finished | None:
        raise PermanentError("the version could not be marked live")


class FinishCannotReachMongo(DocumentLifecycle):
    """The lifecycle, with MongoDB not answering the step that finishes a published run (the
    message comes back later, or, if it is lost, the reconciler takes over)."""

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        raise ServiceUnavailable("mongodb", "no answer")

    async def finish_as_read(self, document: Document) -> Finished | None:
        raise ServiceUnavailable("mongodb", "no answer")


class FinishSeesCaches(DocumentLifecycle):
    """The lifecycle, noting at each finish (the write that marks a document indexed) the
    revision the search caches had been told of its KB, and the KB's revision then."""

    def __init__(self, db: Database, told: dict[str, int]) -> None:
        super().__init__(db.client, db, Outbox(db))
        self._db = db
        self._told = told
        self.at_finish: list[tuple[int, int]] = []

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        await self._note(document_id)
        return await super().finish(document_id, generation)

    async def finish_as_read(self, document: Document) -> Finished | None:
        await self._note(document.id)
        return await super().finish_as_read(document)

    async def _note(self, document_id: str) -> None:
        document = await DocumentRepository(self._db).find(document_id)
        assert document is not None
        kb = await self._db["knowledge_bases"].find_one({"_id": document.kb_id})
        assert kb is not None
        self.at_finish.append((self._told.get(document.kb_id, 0), int(kb["revision"])))


class PermissionChangeAtPublish:
    """The vector store, with an admin changing who may read the document just before it is
    published: stored in MongoDB after the index stage read the document, written to the
    document's points (as the API does), and then overwritten by the publish."""

    def __init__(self, store: VectorStore, db: Database, governance: Governance) -> None:
        self._store = store
        self._documents = DocumentRepository(db)
        self._governance = governance

    async def publish_document(self, published: PublishedDocument) -> None:
        await self._documents.set_governance(
            published.tenant_id, published.document_id, self._governance
        )
        await self._store.set_readers(
            chunks_of_document(published.tenant_id, published.document_id),
            self._governance.readers(),
        )
        await self._store.publish_document(published)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class FinishSeesReaders(DocumentLifecycle):
    """The lifecycle, noting at each finish from what is stored how many of the document's
    chunks each reader sees."""

    def __init__(self, db: Database, store: VectorStore) -> None:
        super().__init__(db.client, db, Outbox(db))
        self._db = db
        self._store = store
        self.seen: list[dict[str, int]] = []

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        document = await DocumentRepository(self._db).find(document_id)
        assert document is not None
        seen = {}
        for reader in ("tenant", "user:ann"):
            scope = SearchScope("acme", (document.kb_id,), (reader,))
            query = VectorQuery(scope, np.ones(DIM, dtype=np.float32), limit=100)
            seen[reader] = len(await self._store.search(query))
        self.seen.append(seen)
        return await super().finish(document_id, generation)


class Stage:
    """The index stage (as the runner runs it) with the repositories it works on."""

    def __init__(
        self,
        db: Database,
        store: VectorStore,
        *,
        finish_fails: bool = False,
        lifecycle: DocumentLifecycle | None = None,
    ) -> None:
        self.db = db
        self.store = store
        self.documents = DocumentRepository(db)
        self.lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
        self.kbs = KnowledgeBaseRepository(db)
        self.blobs = BlobStore(db)
        self.freshness = RecordedRevisions()
        if lifecycle is None:
            lifecycle = FinishFails(db.client, db, Outbox(db)) if finish_fails else self.lifecycle
        handler = IndexHandler(
            self.documents,
            lifecycle,
            only_generation(db, store, DIM),
            self.blobs,
            self.freshness,
            hashed_encoders(DIM, Path(".")),
        )
        self.stage = document_stage(
            "index",
            ChunkBatchEmbedded,
            ParseStatus.INDEXING,
            handler,
            self.documents,
            StagePolicy(max_attempts=1),
            slow_means_outage=True,
            on_failure=handler.withdraw,
        )
        self.handler = self.stage.handler
        self.dead: list[dict[str, str]] = []

        async def publish(events: Sequence[Event]) -> None:
            raise AssertionError("the index stage publishes nothing")

        async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
            self.dead.append(headers)

        self.runner = StageRunner(
            self.stage, self.documents, publish, dead_letter, IngestSettings()
        )

    async def run(self, batch: ChunkBatchEmbedded) -> None:
        """Handles one message as the worker does: errors mapped to actions."""
        await self.runner.run(batch.model_dump_json().encode())

    async def document(self, kb_id: str, filename: str = "a.pdf", chunks: int = 7) -> Document:
        """A document as the intake creates it, chunked into `chunks` chunks in 2 batches."""
        source = file_source_key(filename)
        stored = await self.blobs.store_original(b"%PDF-", filename, "doc")
        document = make_document(
            "acme", kb_id, filename=filename, title="A", source_key=source,
            storage_key=stored.storage_key, parse_status=ParseStatus.EMBEDDING,
        )  # fmt: skip
        (document,) = (await self.lifecycle.create([document], number=True)).documents
        await self.documents.record_chunking(
            document.id, 1, chunk_count=chunks, text_char_count=10 * chunks, batch_count=2
        )
        return document

    async def visible(self, kb_id: str) -> set[str]:
        """Ids of the documents a search sees."""
        hits = await self.store.search(
            VectorQuery(
                scope=SearchScope("acme", (kb_id,), ("tenant",)),
                dense=np.ones(DIM, dtype=np.float32) / np.sqrt(DIM),
                limit=100,
            )
        )
        return {str(hit.payload.document_id) for hit in hits}


def _batches(document: Document, chunks: int = 7) -> list[ChunkBatchEmbedded]:
    split = chunks // 2 + 1
    return [
        _batch(document, 0, range(0, split), last=False),
        _batch(document, 1, range(split, chunks), last=True),
    ]


def _batch(document: Document, index: int, chunks: range, *, last: bool) -> ChunkBatchEmbedded:
    records = [
        ChunkRecord(chunk_index=i, text=f"chunk {i}", start=i * 10, end=i * 10 + 7, page=1)
        for i in chunks
    ]
    vectors = np.random.default_rng(index).normal(size=(len(records), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return ChunkBatchEmbedded(
        tenant_id=document.tenant_id,
        kb_id=document.kb_id,
        document_id=document.id,
        generation=document.generation,
        batch_index=index,
        last=last,
        chunks=records,
        model="test",
        dimensions=DIM,
        dense_b64=ChunkBatchEmbedded.encode_vectors(vectors),
    )


async def test_a_document_becomes_searchable_only_when_complete(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    document = await stage.document(kb.id)
    first, last = _batches(document)
    # The last batch arrives first (batches travel on different partitions) ...
    assert not (await stage.handler(last)).finished_document
    assert await stage.visible(kb.id) == set()
    assert await store.count(chunks_where("acme", document_id=document.id, active=False)) == 3
    # ... and the document appears whole when the other one is in.
    assert (await stage.handler(first)).finished_document
    assert await stage.visible(kb.id) == {document.id}
    assert await store.count(chunks_where("acme", document_id=document.id, active=True)) == 7
    # Replaying either batch changes nothing: no duplicates, no recount.
    for batch in (first, last):
        assert (await stage.handler(batch)).skipped
    assert await store.count(chunks_where("acme", document_id=document.id)) == 7
    finished = await stage.documents.find(document.id)
    assert finished is not None
    assert finished.parse_status is ParseStatus.INDEXED
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 7)
    # Cached answers of the KB's older revisions are retired.
    assert stage.freshness.told == {kb.id: counted.revision}
    hit = (await store.search(
        VectorQuery(
            SearchScope("acme", (kb.id,), ("tenant",)), np.ones(DIM, dtype=np.float32), limit=1
        )
    ))[0]  # fmt: skip
    assert hit.payload.document_id == document.id
    assert hit.payload.chunk_id.startswith(f"{document.id}_chunk_")
    assert hit.payload.document_title
    assert hit.payload.source_name
    assert hit.payload.version == document.version
    assert hit.payload.end is not None
    assert hit.payload.start is not None


async def test_a_permission_change_stored_while_a_document_is_published_reaches_its_chunks(
    db: Database, store: VectorStore
) -> None:
    only_ann = Governance(visibility_mode=Visibility.RESTRICTED, user_grants=["ann"])
    lifecycle = FinishSeesReaders(db, store)
    stage = Stage(
        db, cast(VectorStore, PermissionChangeAtPublish(store, db, only_ann)), lifecycle=lifecycle
    )
    kb = await stage.kbs.create("acme", "KB", "", "en")
    document = await stage.document(kb.id)
    assert "tenant" in document.readers
    for batch in _batches(document):
        await stage.handler(batch)
    # The chunks carried the new readers before the run was marked indexed (a crash after
    # that leaves no chunk readable by whoever may no longer read it).
    assert lifecycle.seen == [{"tenant": 0, "user:ann": 7}]
    finished = await stage.documents.find(document.id)
    assert finished is not None
    assert finished.parse_status is ParseStatus.INDEXED
    assert finished.readers == only_ann.readers() == ["role:admin", "user:ann"]
    # Whoever could read it before no longer can; the new reader can, every chunk of it.
    assert await stage.visible(kb.id) == set()
    scope = SearchScope("acme", (kb.id,), ("user:ann",))
    hits = await store.search(VectorQuery(scope, np.ones(DIM, dtype=np.float32), limit=100))
    assert {hit.payload.document_id for hit in hits} == {document.id}
    assert len(hits) == 7
    assert all(hit.payload.readers == only_ann.readers() for hit in hits)


async def test_whoever_sees_a_document_indexed_is_not_answered_from_a_cache_of_before(
    db: Database, store: VectorStore
) -> None:
    # A search's answers are cached per KB revision. The revision moves on (and the caches are
    # told) after the publish, so no answer of before the publish is cached under it, and
    # before the status says indexed, so whoever sees it indexed is not answered from a cache
    # of before the new version (seen on a loaded machine).
    told: dict[str, int] = {}
    lifecycle = FinishSeesCaches(db, told)
    stage = Stage(db, store, lifecycle=lifecycle)
    stage.freshness.told = told
    kb = await stage.kbs.create("acme", "KB", "", "en")
    at_publish: list[int] = []
    publish = store.publish_document

    async def publish_seen(document: PublishedDocument) -> None:
        at_publish.append(await _revision(db, document.kb_id))
        await publish(document)

    store.publish_document = publish_seen  # type: ignore[method-assign]
    for _ in range(2):  # a first version, then a second replacing it
        document = await stage.document(kb.id)
        for batch in _batches(document):
            await stage.handler(batch)
        finished = await stage.documents.find(document.id)
        assert finished is not None
        assert finished.parse_status is ParseStatus.INDEXED
    assert len(at_publish) == len(lifecycle.at_finish) == 2
    for published_at, (told_then, revision_then) in zip(
        at_publish, lifecycle.at_finish, strict=True
    ):
        assert revision_then > published_at  # moved on after the publish...
        assert told_then == revision_then  # ...and the caches knew before "indexed"


async def _revision(db: Database, kb_id: str) -> int:
    kb = await db["knowledge_bases"].find_one({"_id": kb_id})
    assert kb is not None
    return int(kb["revision"])


async def test_a_new_version_replaces_the_old_one_when_it_is_complete(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    old = await stage.document(kb.id, chunks=7)
    for batch in _batches(old, 7):
        await stage.handler(batch)
    new = await stage.document(kb.id, chunks=5)
    assert new.version == old.version + 1
    first, last = _batches(new, 5)
    await stage.handler(first)
    # Half-written, the new version is not shown; the old one still is.
    assert await stage.visible(kb.id) == {old.id}
    await stage.handler(last)
    assert await stage.visible(kb.id) == {new.id}
    assert await store.count(chunks_where("acme", document_id=old.id)) == 0
    assert await stage.documents.find(old.id) is None
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 5)
    with pytest.raises(Exception, match="not found"):
        await stage.blobs.read(old.storage_key)


async def test_an_older_version_finishing_late_is_dropped(db: Database, store: VectorStore) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    slow = await stage.document(kb.id)
    fast = await stage.document(kb.id)
    slow_batches = _batches(slow)
    await stage.handler(slow_batches[0])
    for batch in _batches(fast):
        await stage.handler(batch)
    # The older version completes after the newer one went live: it never shows.
    assert (await stage.handler(slow_batches[1])).skipped
    assert await stage.visible(kb.id) == {fast.id}
    assert await store.count(chunks_where("acme", document_id=slow.id)) == 0
    assert await stage.documents.find(slow.id) is None
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 7)
    # Cached answers of the KB's older revisions are retired.
    assert stage.freshness.told == {kb.id: counted.revision}


async def test_a_batch_for_a_deleted_document_leaves_no_points(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    document = await stage.document(kb.id)
    await stage.documents.begin_delete("acme", kb.id, document.id)
    assert (await stage.handler(_batches(document)[1])).skipped
    assert await store.count(chunks_where("acme", document_id=document.id)) == 0


async def test_a_new_version_failing_after_its_publication_leaves_the_old_one_as_it_was(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    old = await stage.document(kb.id, chunks=7)
    for batch in _batches(old, 7):
        await stage.run(batch)
    failing = Stage(db, store, finish_fails=True)
    new = await failing.document(kb.id, chunks=5)
    for batch in _batches(new, 5):
        await failing.run(batch)
    # The last batch published the new version, then finishing it failed for good: the
    # document is failed with the reason, and none of its points is left, shown or not.
    failed = await stage.documents.find(new.id)
    assert failed is not None
    assert failed.parse_status is ParseStatus.FAILED
    assert failed.parse_error == "the version could not be marked live"
    assert [letter["document_id"] for letter in failing.dead] == [new.id]
    assert await store.count(chunks_where("acme", document_id=new.id)) == 0
    # The old version is searchable again, whole, and still the live, counted one.
    assert await stage.visible(kb.id) == {old.id}
    assert await store.count(chunks_where("acme", document_id=old.id, active=True)) == 7
    kept = await stage.documents.find(old.id)
    assert kept is not None
    assert kept.parse_status is ParseStatus.INDEXED
    assert await stage.lifecycle.live_version(kb.id, old.source_key) == old.version
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (2, 7)
    # Cached answers that may have seen the new version are retired.
    assert failing.freshness.told == {kb.id: counted.revision}


async def test_a_reindex_failing_after_its_publication_leaves_nothing_of_it_searchable(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    document = await stage.document(kb.id, chunks=7)
    for batch in _batches(document, 7):
        await stage.run(batch)
    # Re-indexed under its own id: the new run overwrites the indexed chunks as it goes.
    again, _ = await stage.lifecycle.restart(document.id)
    await stage.documents.record_chunking(
        document.id, again.generation, chunk_count=5, text_char_count=50, batch_count=2
    )
    failing = Stage(db, store, finish_fails=True)
    for batch in _batches(again, 5):
        await failing.run(batch)
    failed = await stage.documents.find(document.id)
    assert failed is not None
    assert failed.parse_status is ParseStatus.FAILED
    assert failed.indexed_chunk_count == 0
    assert await store.count(chunks_where("acme", document_id=document.id)) == 0
    assert await stage.visible(kb.id) == set()
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 0)
    # A re-index that then succeeds counts its chunks once.
    restarted, _ = await stage.lifecycle.restart(document.id)
    await stage.documents.record_chunking(
        document.id, restarted.generation, chunk_count=5, text_char_count=50, batch_count=2
    )
    for batch in _batches(restarted, 5):
        await stage.run(batch)
    assert await stage.visible(kb.id) == {document.id}
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (1, 5)


async def test_a_published_run_the_reconciler_fails_is_taken_out_of_search(
    db: Database, store: VectorStore
) -> None:
    stage = Stage(db, store)
    kb = await stage.kbs.create("acme", "KB", "", "en")
    old = await stage.document(kb.id, chunks=7)
    for batch in _batches(old, 7):
        await stage.run(batch)
    stuck = Stage(db, store, lifecycle=FinishCannotReachMongo(db.client, db, Outbox(db)))
    new = await stuck.document(kb.id, chunks=5)
    first, last = _batches(new, 5)
    await stuck.run(first)
    with pytest.raises(ServiceUnavailable):
        await stuck.run(last)  # published, then never marked live
    assert await stage.visible(kb.id) == {new.id}
    # Its message is lost; the reconciler gives up on the document (in the relay, which may
    # not reach the vector store).
    assert await stage.documents.mark_failed(new.id, new.generation, "stuck", by_stage=False)
    removal = RemovalService(
        stage.documents,
        stage.kbs,
        stage.lifecycle,
        stage.blobs,
        store,
        stage.freshness,  # type: ignore[arg-type]
    )
    # The API process's sweep takes the run out of search and shows the old version again.
    assert await removal.withdraw_failed_runs() == 1
    assert await store.count(chunks_where("acme", document_id=new.id)) == 0
    assert await stage.visible(kb.id) == {old.id}
    assert await store.count(chunks_where("acme", document_id=old.id, active=True)) == 7
    failed = await stage.documents.find(new.id)
    assert failed is not None
    assert (failed.parse_status, failed.parse_error) == (ParseStatus.FAILED, "stuck")
    (counted,) = await stage.kbs.counted([await stage.kbs.get("acme", kb.id)])
    assert (counted.document_count, counted.chunk_count) == (2, 7)
    assert stage.freshness.told == {kb.id: counted.revision}
    # Once done, it is not done again; a run the reconciler failed before its publication
    # leaves nothing to withdraw and the live version as it is.
    assert await removal.withdraw_failed_runs() == 0
    early = await stuck.document(kb.id, filename="b.pdf", chunks=5)
    assert await stage.documents.mark_failed(early.id, early.generation, "stuck", by_stage=False)
    assert await removal.withdraw_failed_runs() == 1
    assert await stage.visible(kb.id) == {old.id}
    assert await removal.withdraw_failed_runs() == 0

"""Searches stay right while documents are written, published, replaced, deleted and the store
optimised, all at once (asyncio tasks, many rounds), on both stores.

Every operation is stamped with a logical clock when it starts and when it returns. A search
that ran from s0 to s1 may return a chunk only if its document's publication started before s1
and its removal had not returned by s0; it must return every chunk whose publication had
returned by s0 and whose removal had not started by s1; and nothing outside its scope, nothing
written but not yet published. The embedded store also shows a publication whole: never two
versions of a source at once (a Qdrant server applies the steps in order, so a search between
them can see both; the search service hides the older one).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from core.filters import SearchScope, chunks_of_document
from core.sparse import SparseVector
from infra.vectorstore.base import (
    ChunkPoint,
    PublishedDocument,
    RankQuery,
    VectorQuery,
    VectorStore,
)
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.qdrant_server import QdrantServerStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id

DIM = 8
EVERYONE = ("tenant",)
KBS = ("kb0", "kb1")
WRITERS = 3
ROUNDS = 12
CHUNKS = 3
# Every chunk holds this term, so the sparse ranking and the probe see every chunk too.
TERM = 7
# Deeper than the most chunks a scope ever holds: every ranking is the whole scope.
DEPTH = 400
OPTIMISE_EVERY = 15


@pytest.fixture(params=["edge", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """Each implementation; the embedded one indexes and quantises a segment from 1 KB of
    vectors on, so its optimisations rebuild segments while the searches run."""
    opened: VectorStore
    if request.param == "edge":
        opened = EdgeVectorStore(tmp_path / "vectors", DIM, indexing_threshold_kb=1)
    else:
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


@dataclass
class Document:
    """A document's place, and when (logical clock) it was shown and removed."""

    doc_id: str
    tenant: str
    kb: str
    source: str
    version: int
    shown: tuple[int, int | None] | None = None
    removed: tuple[int, int | None] | None = None

    @property
    def point_ids(self) -> list[str]:
        return [chunk_point_id(self.doc_id, index) for index in range(CHUNKS)]

    def may_be_seen(self, s0: int, s1: int) -> bool:
        shown_from = self.shown[0] if self.shown else None
        removed_by = self.removed[1] if self.removed else None
        return (
            shown_from is not None and shown_from < s1 and (removed_by is None or removed_by > s0)
        )

    def must_be_seen(self, s0: int, s1: int) -> bool:
        shown_by = self.shown[1] if self.shown else None
        removed_from = self.removed[0] if self.removed else None
        return (
            shown_by is not None and shown_by < s0 and (removed_from is None or removed_from > s1)
        )


@dataclass
class Ledger:
    """The documents and a logical clock (the event loop runs one task at a time)."""

    documents: dict[str, Document] = field(default_factory=dict)
    by_point: dict[str, Document] = field(default_factory=dict)
    clock: itertools.count[int] = field(default_factory=itertools.count)
    searches: int = 0
    grown: asyncio.Event = field(default_factory=asyncio.Event)

    def tick(self) -> int:
        return next(self.clock)

    def add(self, document: Document) -> None:
        self.documents[document.doc_id] = document
        self.by_point.update(dict.fromkeys(document.point_ids, document))
        self.grown.set()


def _vector(rng: np.random.Generator) -> np.ndarray:
    vector = rng.normal(size=DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _chunks(document: Document, rng: np.random.Generator) -> list[ChunkPoint]:
    return [
        ChunkPoint(
            point_id=point_id,
            dense=_vector(rng),
            sparse=SparseVector([TERM], [1.0]),
            payload=ChunkPayload(
                tenant_id=document.tenant,
                kb_id=document.kb,
                document_id=document.doc_id,
                chunk_index=index,
                chunk_text=document.doc_id,
                active=False,
                readers=list(EVERYONE),
                source_key=document.source,
                version=document.version,
            ),
        )
        for index, point_id in enumerate(document.point_ids)
    ]


async def _publish(store: VectorStore, ledger: Ledger, document: Document) -> None:
    """Writes the document's chunks hidden, then publishes them: an older version of its
    source is removed in the same step."""
    await store.upsert(_chunks(document, np.random.default_rng(len(ledger.documents))))
    older = [
        other
        for other in ledger.documents.values()
        if (other.tenant, other.kb, other.source) == (document.tenant, document.kb, document.source)
        and other.version < document.version
        and other.removed is None
    ]
    ledger.add(document)
    start = ledger.tick()
    document.shown = (start, None)
    for other in older:
        other.removed = (start, None)
    await store.publish_document(
        PublishedDocument(
            tenant_id=document.tenant,
            kb_id=document.kb,
            document_id=document.doc_id,
            source_key=document.source,
            version=document.version,
            keep_chunks=CHUNKS,
            readers=EVERYONE,
        )
    )
    end = ledger.tick()
    document.shown = (start, end)
    for other in older:
        other.removed = (start, end)


async def _remove(store: VectorStore, ledger: Ledger, document: Document, by_id: bool) -> None:
    start = ledger.tick()
    document.removed = (start, None)
    if by_id:
        await store.delete_points(document.point_ids)
    else:
        await store.delete(chunks_of_document(document.tenant, document.doc_id))
    document.removed = (start, ledger.tick())


async def _writer(store: VectorStore, ledger: Ledger, writer: int) -> None:
    """Each round publishes a document; every other round's is a new version of the previous
    round's source (which it replaces), and every third round removes an earlier document."""
    mine: list[Document] = []
    for round_ in range(ROUNDS):
        document = Document(
            doc_id=f"doc_w{writer}_r{round_}",
            tenant="t1",
            kb=KBS[(writer + round_ // 2) % len(KBS)],
            source=f"file:w{writer}_{round_ // 2}.txt",
            version=round_ % 2 + 1,
        )
        await _publish(store, ledger, document)
        mine.append(document)
        if round_ % 3 == 2:
            earlier = next((d for d in mine[:-1] if d.removed is None), None)
            if earlier is not None:
                await _remove(store, ledger, earlier, by_id=round_ % 2 == 0)


def _check(ledger: Ledger, scope: SearchScope, seen: set[str], s0: int, s1: int) -> None:
    """The points a read of `scope` from s0 to s1 returned are the right ones."""
    for point_id in seen:
        document = ledger.by_point.get(point_id)
        assert document is not None, point_id
        assert document.tenant == scope.tenant_id
        assert document.kb in scope.kb_ids
        assert document.may_be_seen(s0, s1), (document, s0, s1)
    for document in ledger.documents.values():
        if (
            document.tenant == scope.tenant_id
            and document.kb in scope.kb_ids
            and document.must_be_seen(s0, s1)
        ):
            assert set(document.point_ids) <= seen, (document, s0, s1)


def _one_version_a_source(ledger: Ledger, seen: set[str]) -> None:
    versions: dict[str, set[int]] = {}
    for point_id in seen:
        document = ledger.by_point[point_id]
        versions.setdefault(document.source, set()).add(document.version)
    assert all(len(shown) == 1 for shown in versions.values()), versions


async def _searcher(
    store: VectorStore, ledger: Ledger, searcher: int, writing: asyncio.Event
) -> None:
    rng = np.random.default_rng(searcher)
    atomic = isinstance(store, EdgeVectorStore)
    for n in itertools.count():
        if not writing.is_set() and n >= 5:
            return
        kbs = KBS if n % 3 == 0 else (KBS[n % 2],)
        scope = SearchScope("t1", kbs, EVERYONE)
        dense = _vector(rng)
        s0 = ledger.tick()
        if n % 2:
            hits = await store.search(VectorQuery(scope, dense, DEPTH))
            seen = {hit.point_id for hit in hits}
            assert all(hit.payload.active for hit in hits)
            s1 = ledger.tick()
            _check(ledger, scope, seen, s0, s1)
        else:
            ranked = await store.rank(
                RankQuery(
                    scope,
                    dense,
                    DEPTH,
                    sparse=SparseVector([TERM], [1.0]),
                    probes=(TERM,),
                    probe_limit=DEPTH,
                )
            )
            s1 = ledger.tick()
            for ranking in (ranked.dense, ranked.sparse):
                seen = {point for point, _ in ranking}
                _check(ledger, scope, seen, s0, s1)
            holders = ranked.holding[TERM]
            assert all(ledger.by_point[point].doc_id == doc for point, doc in holders)
            _check(ledger, scope, {point for point, _ in holders}, s0, s1)
            # The chunks ranked, read: those still there, and no other.
            wanted = [point for point, _ in ranked.dense]
            f0 = ledger.tick()
            read = await store.read(scope, wanted)
            f1 = ledger.tick()
            seen = set(read)
            assert seen <= set(wanted)
            for point_id in set(wanted) - seen:
                assert not ledger.by_point[point_id].must_be_seen(f0, f1)
            _check(ledger, scope, seen, f0, f1)
        if atomic:
            _one_version_a_source(ledger, seen)
        # Another tenant's chunks, in the same KBs, never change and are always found alone.
        foreign = await store.search(VectorQuery(SearchScope("t2", KBS, EVERYONE), dense, DEPTH))
        assert {hit.payload.document_id for hit in foreign} == {"doc_foreign"}
        assert len(foreign) == CHUNKS
        ledger.searches += 1


async def _optimiser(store: VectorStore, ledger: Ledger, writing: asyncio.Event) -> int:
    """Optimises the embedded store after every `OPTIMISE_EVERY` documents published. (Each
    optimisation takes about a second here, whatever it rebuilds, and nothing else in the
    process runs meanwhile: more would only slow the test.)"""
    runs = 0
    if not isinstance(store, EdgeVectorStore):
        return runs
    due = OPTIMISE_EVERY
    while True:
        while writing.is_set() and len(ledger.documents) < due:
            ledger.grown.clear()
            await ledger.grown.wait()
        if not writing.is_set():
            return runs
        await store.optimize()
        runs += 1
        due = len(ledger.documents) + OPTIMISE_EVERY


async def test_searches_stay_right_while_the_store_is_written_and_optimised(
    store: VectorStore,
) -> None:
    ledger = Ledger()
    await _publish(
        store,
        ledger,
        Document(doc_id="doc_foreign", tenant="t2", kb="kb0", source="file:f.txt", version=1),
    )
    writing = asyncio.Event()
    writing.set()
    searchers = [asyncio.create_task(_searcher(store, ledger, n, writing)) for n in range(4)]
    optimiser = asyncio.create_task(_optimiser(store, ledger, writing))
    await asyncio.gather(*(_writer(store, ledger, n) for n in range(WRITERS)))
    writing.clear()
    ledger.grown.set()
    await asyncio.gather(*searchers)
    runs = await optimiser
    assert ledger.searches >= 4 * 5
    if isinstance(store, EdgeVectorStore):
        assert runs >= 1
    # Settled: every scope holds exactly what was published and not removed.
    now = ledger.tick()
    for kbs in (KBS, *((kb,) for kb in KBS)):
        scope = SearchScope("t1", kbs, EVERYONE)
        hits = await store.search(VectorQuery(scope, np.ones(DIM, np.float32) / DIM**0.5, DEPTH))
        expected = {
            point_id
            for document in ledger.documents.values()
            if document.tenant == "t1" and document.kb in kbs and document.must_be_seen(now, now)
            for point_id in document.point_ids
        }
        assert {hit.point_id for hit in hits} == expected
        assert expected

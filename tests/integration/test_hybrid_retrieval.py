"""Hybrid retrieval over the embedded store: one ranking call of ids and scores, then reads of
the chunks looked at (real model, a few seconds)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path

import pytest

from core.filters import SearchScope
from core.retrieval import RetrievalMode
from core.sparse import SparseEncoder, term_index
from infra.embedding.base import Embedder
from infra.vectorstore.base import ChunkPoint, Rankings, RankQuery, StoredChunk
from infra.vectorstore.edge import EdgeVectorStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id
from services.search.fusion import FusionParams
from services.search.retrieval import Feedback, Ranked, Retriever, query_terms, terms_of

TOPICS = [
    "restart the router after a firmware update",
    "the router fan is loud when the room is hot",
    "reset the router to factory settings with the pin",
    "router lights blink orange when the uplink is down",
    "kayaks are returned within thirty days",
    "the warranty covers the router for two years",
    "replace the router's power supply",
    "port forwarding on the router for game consoles",
    "the router's guest network has its own password",
    "update the router firmware from the admin page",
    "paddles are sold separately from kayaks",
    "the router logs are kept for seven days",
]


class CountingStore(EdgeVectorStore):
    """The embedded store, counting its ranking calls and reads."""

    rankings = 0
    reads = 0

    async def rank(self, query: RankQuery) -> Rankings:
        self.rankings += 1
        return await super().rank(query)

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        self.reads += 1
        return await super().read(scope, point_ids, dense)


@pytest.fixture
async def store(tmp_path: Path, embedder: Embedder) -> AsyncIterator[CountingStore]:
    """The manual's chunks, written as before payloads held their terms: a search reads the
    terms from the text."""
    opened = CountingStore(tmp_path / "vectors", embedder.dimensions)
    await opened.ensure_collection()
    encoder = SparseEncoder()
    vectors = embedder.embed_documents(TOPICS)
    await opened.upsert(
        [
            ChunkPoint(
                point_id=chunk_point_id("doc_manual", index),
                dense=vectors[index],
                sparse=encoder.document(text),
                payload=ChunkPayload(
                    tenant_id="t1",
                    kb_id="kb1",
                    document_id="doc_manual",
                    chunk_index=index,
                    chunk_text=text,
                    active=True,
                    readers=["tenant"],
                ),
            )
            for index, text in enumerate(TOPICS)
        ]
    )
    yield opened
    await opened.close()


@pytest.fixture
def retriever(store: CountingStore, embedder: Embedder) -> Retriever:
    return Retriever(embedder, store, SparseEncoder(), depth=100)


async def test_one_ranking_call_orders_every_candidate_without_reading_one(
    store: CountingStore, retriever: Retriever
) -> None:
    query = "router firmware"
    scope = SearchScope("t1", ("kb1",), ("tenant",))
    vector = await retriever.embed(query)
    ranked = await retriever.rank(
        scope, query, vector, mode=RetrievalMode.HYBRID, threshold=0.0, fusion=FusionParams()
    )
    assert store.rankings == 1
    assert store.reads == 0
    # Every chunk both retrievers ranked, in fused order, each with its cosine.
    assert len(ranked.order) == len(TOPICS)
    assert set(ranked.cosines) == set(ranked.order)
    # The first chunks are read (texts, terms), in one read; a chunk deleted since it was
    # ranked is not among them.
    await store.delete_points([ranked.order[1]])
    stored: dict[str, StoredChunk | None] = {}
    await retriever.read(scope, ranked, 3, stored)
    assert store.reads == 1
    assert {point for point, chunk in stored.items() if chunk} == {ranked.order[0], ranked.order[2]}
    candidates = ranked.candidates(3, stored, vector)
    assert [c.position for c in candidates] == [0, 2]
    firmware = {t for t in TOPICS if "firmware" in t}
    assert candidates[0].chunk.payload.chunk_text in firmware
    assert term_index("router") in terms_of(candidates[0].chunk)
    # Reading again reads only what is not read yet.
    await retriever.read(scope, ranked, 3, stored)
    assert store.reads == 1


async def test_a_threshold_keeps_close_chunks_and_exact_keyword_matches(
    store: CountingStore, retriever: Retriever
) -> None:
    query = "router firmware"
    scope = SearchScope("t1", ("kb1",), ("tenant",))
    vector = await retriever.embed(query)
    ranked = await retriever.rank(
        scope, query, vector, mode=RetrievalMode.HYBRID, threshold=0.99, fusion=FusionParams()
    )
    # Nothing is that close: the dense ranking brings no chunk, the sparse one every chunk
    # with a query term. Those can pass only as exact keyword matches, whatever their cosine:
    # they are read without their vectors.
    assert ranked.cosines == {}
    assert ranked.window(20, 100) == len(ranked.order)
    stored: dict[str, StoredChunk | None] = {}
    await retriever.read(scope, ranked, len(ranked.order), stored)
    assert all(chunk is not None and chunk.dense is None for chunk in stored.values())
    candidates = ranked.candidates(len(ranked.order), stored, vector)
    assert all(c.below_threshold and c.cosine is None for c in candidates)
    assert {c.chunk.payload.chunk_text for c in candidates} == {
        "update the router firmware from the admin page",
        "restart the router after a firmware update",
    }
    # The one shown gets its cosine for its rationale, in one more read (of it alone).
    reads = store.reads
    (shown,) = await retriever.with_cosines(scope, candidates[:1], vector)
    assert store.reads == reads + 1
    assert shown.cosine is not None
    assert 0 < shown.cosine < 0.99
    why = shown.rationale(query_terms(query), vector)
    assert f"semantic cosine {shown.cosine:.2f}" in why
    assert "2 of 2 query terms" in why
    assert "kept as an exact keyword match below the similarity threshold" in why
    # A candidate whose cosine is known costs no read.
    assert await retriever.with_cosines(scope, [shown], vector) == [shown]
    assert store.reads == reads + 1


async def test_feedback_widens_a_questions_keyword_query_with_its_best_matches_terms(
    store: CountingStore, embedder: Embedder
) -> None:
    scope = SearchScope("t1", ("kb1",), ("tenant",))

    async def hybrid(retriever: Retriever, query: str) -> Ranked:
        vector = await retriever.embed(query)
        return await retriever.rank(
            scope,
            query,
            vector,
            mode=RetrievalMode.HYBRID,
            threshold=0.0,
            fusion=FusionParams(),
        )

    # None of the question's words is in the manual: BM25 alone finds nothing.
    question = "why does my internet box keep switching itself off and on?"
    plain = Retriever(embedder, store, SparseEncoder(), depth=100)
    found = await hybrid(plain, question)
    assert all(f.sparse_rank is None for f in found.fused.values())
    # With feedback, the best semantic matches lend it their shared words ("router"): the
    # keyword side ranks chunks too, in a second ranking call after reading those matches.
    widened = Retriever(embedder, store, SparseEncoder(), depth=100, feedback=Feedback(3, 2, 0.3))
    before, reads = store.rankings, store.reads
    found = await hybrid(widened, question)
    assert (store.rankings, store.reads) == (before + 2, reads + 1)
    keyword = [f.point_id for f in found.fused.values() if f.sparse_rank is not None]
    assert keyword
    stored = await store.read(scope, keyword)
    assert all("router" in chunk.payload.chunk_text for chunk in stored.values())
    # A query naming an identifier asks for its very words: no feedback.
    await hybrid(widened, "what does error XJ-4471 mean")
    # Nor for keywords or a description in the documents' words.
    await hybrid(widened, "internet box switching off and on")
    assert store.rankings == before + 4

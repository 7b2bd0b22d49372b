"""Hybrid retrieval over the embedded store: one ranking call, then one read of the texts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from core.filters import SearchScope
from infra.embedding.base import Embedder
from infra.sparse import SparseEncoder, term_index
from infra.vectorstore.base import ChunkPoint, Rankings, RankQuery, RetrievalMode, StoredChunk
from infra.vectorstore.edge import EdgeVectorStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id
from services.search.fusion import FusionParams
from services.search.retrieval import Feedback, Retrieved, Retriever

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
        self, scope: SearchScope, point_ids: Sequence[str], dense: bool = False
    ) -> dict[str, StoredChunk]:
        self.reads += 1
        return await super().read(scope, point_ids, dense)


@pytest.fixture
async def store(tmp_path: Path, embedder: Embedder) -> AsyncIterator[CountingStore]:
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


def _ids(found: Retrieved) -> list[str]:
    return [candidate.chunk.point_id for candidate in found.candidates]


async def test_one_ranking_call_brings_every_candidate_without_its_text(
    store: CountingStore, retriever: Retriever
) -> None:
    query = "router firmware"
    scope = SearchScope("t1", ("kb1",), ("tenant",))
    vector = await retriever.embed(query)
    found = await retriever.retrieve(
        scope, query, vector, mode=RetrievalMode.HYBRID, threshold=0.0, fusion=FusionParams()
    )
    assert store.rankings == 1
    assert store.reads == 0
    # Every chunk both retrievers ranked, in fused order, with what folding needs.
    assert len(found.candidates) == len(TOPICS) == found.ranked
    assert [c.position for c in found.candidates] == list(range(len(TOPICS)))
    firmware = [TOPICS.index(t) for t in TOPICS if "firmware" in t]
    assert {c.chunk.fields["chunk_index"] for c in found.candidates[:2]} == set(firmware)
    assert all("chunk_text" not in c.chunk.fields for c in found.candidates)
    assert all(c.chunk.fields["copy_signature"] for c in found.candidates)
    # A threshold keeps the chunks close enough in meaning, and exact keyword matches.
    strict = await retriever.retrieve(
        scope, query, vector, mode=RetrievalMode.HYBRID, threshold=0.99, fusion=FusionParams()
    )
    assert strict.candidates
    assert all(c.below_threshold for c in strict.candidates)
    assert {TOPICS[c.chunk.fields["chunk_index"]] for c in strict.candidates} == {
        "update the router firmware from the admin page",
        "restart the router after a firmware update",
    }
    # The chosen chunks' texts come in one read; a chunk deleted meanwhile is not among them.
    chosen = [c.chunk.point_id for c in found.candidates[:3]]
    await store.delete_points([chosen[1]])
    texts = await retriever.read(scope, chosen)
    assert store.reads == 1
    assert set(texts) == {chosen[0], chosen[2]}
    assert texts[chosen[0]].payload.chunk_text in TOPICS
    assert term_index("router") in texts[chosen[0]].terms


async def test_feedback_widens_a_questions_keyword_query_with_its_best_matches_terms(
    store: CountingStore, embedder: Embedder
) -> None:
    scope = SearchScope("t1", ("kb1",), ("tenant",))

    async def hybrid(retriever: Retriever, query: str) -> Retrieved:
        vector = await retriever.embed(query)
        return await retriever.retrieve(
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
    assert found.fused is not None
    assert all(f.sparse_rank is None for f in found.fused)
    # With feedback, the best semantic matches lend it their shared words ("router"): the
    # keyword side ranks chunks too, in a second ranking call.
    widened = Retriever(embedder, store, SparseEncoder(), depth=100, feedback=Feedback(3, 2, 0.3))
    before = store.rankings
    found = await hybrid(widened, question)
    assert store.rankings == before + 2
    assert found.fused is not None
    keyword = [f for f in found.fused if f.sparse_rank is not None]
    assert keyword
    indexes = {c.chunk.point_id: c.chunk.fields["chunk_index"] for c in found.candidates}
    assert all("router" in TOPICS[indexes[f.point_id]] for f in keyword if f.point_id in indexes)
    # A query naming an identifier asks for its very words: no feedback.
    await hybrid(widened, "what does error XJ-4471 mean")
    # Nor for keywords or a description in the documents' words.
    await hybrid(widened, "internet box switching off and on")
    assert store.rankings == before + 4

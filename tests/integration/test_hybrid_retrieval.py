"""Hybrid retrieval over the embedded store: a deeper look at a search continues its ranking."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import redis.asyncio as redis
from numpy.typing import NDArray

from core.filters import SearchScope
from devstack.launcher import LocalServices
from infra.embedding.base import Embedder
from infra.search_cache import SearchCache
from infra.settings import SearchSettings
from infra.sparse import SparseEncoder
from infra.vectorstore.base import ChunkPoint, Rankings, RetrievalMode, SparseVector
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
    """The embedded store, counting how often it is asked to rank (both retrievers, and BM25
    alone)."""

    rankings = 0
    sparse_rankings = 0

    async def sparse_rank(
        self, scope: SearchScope, sparse: SparseVector, depth: int
    ) -> list[tuple[str, float]]:
        self.sparse_rankings += 1
        return await super().sparse_rank(scope, sparse, depth)

    async def rank(
        self,
        scope: SearchScope,
        dense: NDArray[np.float32],
        sparse: SparseVector | None,
        depth: int,
        probes: Sequence[int] = (),
        probe_limit: int = 0,
    ) -> Rankings:
        self.rankings += 1
        return await super().rank(scope, dense, sparse, depth, probes, probe_limit)


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
async def cache(local_services: LocalServices) -> AsyncIterator[SearchCache]:
    opened = SearchCache(redis.Redis.from_url(local_services.redis_url), SearchSettings())
    yield opened
    await opened.close()


@pytest.fixture
def retriever(store: CountingStore, embedder: Embedder, cache: SearchCache) -> Retriever:
    return Retriever(embedder, store, cache, SparseEncoder(), depth=100)


def _ids(found: Retrieved) -> list[str]:
    return [candidate.chunk.point_id for candidate in found.candidates]


async def test_a_deeper_look_continues_the_ranking_without_ranking_again(
    store: CountingStore, retriever: Retriever
) -> None:
    query = "router firmware"
    scope = SearchScope("t1", ("kb1",), ("tenant",))
    vector = (await retriever.embed(query)).vector

    async def retrieve(limit: int, previous: Retrieved | None = None) -> Retrieved:
        return await retriever.retrieve(
            scope,
            query,
            vector,
            mode=RetrievalMode.HYBRID,
            limit=limit,
            threshold=0.0,
            fusion=FusionParams(),
            previous=previous,
        )

    first = await retrieve(3)
    deeper = await retrieve(9, first)
    assert store.rankings == 1
    at_once = await retrieve(9)
    assert _ids(deeper) == _ids(at_once)
    assert len(_ids(deeper)) == 9
    assert _ids(deeper)[:3] == _ids(first)
    assert [c.score for c in deeper.candidates] == [c.score for c in at_once.candidates]
    # A chunk deleted between the two looks is not handed out by the deeper one.
    seventh = deeper.candidates[6].chunk.point_id
    first = await retrieve(3)
    await store.delete_points([seventh])
    again = await retrieve(9, first)
    assert _ids(again) == [i for i in _ids(at_once) if i != seventh]


async def test_feedback_widens_a_questions_keyword_query_with_its_best_matches_terms(
    store: CountingStore, embedder: Embedder, cache: SearchCache
) -> None:
    scope = SearchScope("t1", ("kb1",), ("tenant",))

    async def hybrid(retriever: Retriever, query: str) -> Retrieved:
        vector = (await retriever.embed(query)).vector
        return await retriever.retrieve(
            scope,
            query,
            vector,
            mode=RetrievalMode.HYBRID,
            limit=12,
            threshold=0.0,
            fusion=FusionParams(),
        )

    # None of the question's words is in the manual: BM25 alone finds nothing.
    question = "why does my internet box keep switching itself off and on?"
    plain = Retriever(embedder, store, cache, SparseEncoder(), depth=100)
    found = await hybrid(plain, question)
    assert found.ranking is not None
    assert all(f.sparse_rank is None for f in found.ranking.fused)
    # With feedback, the best semantic matches lend it their shared words ("router"): the
    # keyword side ranks chunks too.
    widened = Retriever(
        embedder, store, cache, SparseEncoder(), depth=100, feedback=Feedback(3, 2, 0.3)
    )
    before = store.sparse_rankings
    found = await hybrid(widened, question)
    assert store.sparse_rankings == before + 1
    assert found.ranking is not None
    keyword = [f for f in found.ranking.fused if f.sparse_rank is not None]
    assert keyword
    texts = {c.chunk.point_id: c.chunk.payload.chunk_text for c in found.candidates}
    assert all("router" in texts[f.point_id] for f in keyword if f.point_id in texts)
    # A query naming an identifier asks for its very words: no feedback.
    await hybrid(widened, "what does error XJ-4471 mean")
    # Nor for keywords or a description in the documents' words.
    await hybrid(widened, "internet box switching off and on")
    assert store.sparse_rankings == before + 1

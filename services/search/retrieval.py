"""Retrieval: the query's vectors, the store query, and what the score threshold keeps.

`score_threshold` is a minimum cosine similarity in every mode, so a bot's setting means the
same thing whether it searches dense or hybrid:

- dense: chunks ranked by cosine; those below the threshold are dropped. `score` is the cosine.
- hybrid: the dense and the sparse (BM25) rankings (`depth` chunks each, one store round
  trip) are fused (`services.search.fusion`), then the best fused chunks are fetched with their
  payloads and exact cosines. With pseudo-relevance feedback (`Feedback`), a question's
  keyword query first gains the terms its best semantic matches share, so a passage that
  answers in other words than the asker's is found by both retrievers: the dense ranking and
  those chunks come first, then the sparse ranking of the widened query (three round trips).
  A fused chunk is kept if its cosine reaches the threshold, or if it is an exact keyword
  match, which embeddings often miss: it contains every term of the query, or every rare
  identifier the query names (a part number, an error code, a flag).
  `score` is the fused score, 0..1, where 1 is the best chunk of both rankings (or a chunk
  placed first for a strong signal).
- sparse (admin tooling only): BM25 alone, no threshold; `score` is the BM25 score.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from core.filters import SearchScope
from infra.embedding.base import Embedder
from infra.embedding.batching import QueryBatcher
from infra.search_cache import SearchCache
from infra.sparse import SparseEncoder, identifier_terms, term_index, tokens, with_feedback
from infra.vectorstore.base import (
    RetrievalMode,
    ScoredChunk,
    SparseVector,
    VectorQuery,
    VectorStore,
)
from services.search.clock import Clock
from services.search.fusion import (
    Fused,
    FusionParams,
    QueryKind,
    for_query,
    fuse,
    query_kind,
)


@dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback for hybrid searches for a question (`QueryKind`): the terms held
    by at least `min_chunks` of the `chunks` best semantic matches join the keyword query at
    `weight` (`infra.sparse.with_feedback`). No chunks: none."""

    chunks: int = 0
    min_chunks: int = 2
    weight: float = 0.3


@dataclass(frozen=True)
class Candidate:
    """A chunk that passed retrieval, with its score and why it was kept."""

    chunk: ScoredChunk
    score: float
    rationale: str


@dataclass(frozen=True)
class HybridRanking:
    """A hybrid search's fused ranking, the cosines its dense ranking found (so those chunks'
    dense vectors need not be read again), and the chunks fetched for it so far (None: gone
    from the store or out of scope since it was ranked)."""

    fused: list[Fused]
    fetched: dict[str, ScoredChunk | None]
    cosines: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Retrieved:
    """The candidates, best first, and whether a larger limit would have found more."""

    candidates: list[Candidate]
    more: bool
    # Hybrid only: what a deeper look at the same search starts from, so the store does not
    # rank again and only chunks not fetched yet are fetched.
    ranking: HybridRanking | None = None


@dataclass(frozen=True)
class QueryVector:
    """A query's dense vector, and whether it came from the cache."""

    vector: NDArray[np.float32]
    cached: bool
    milliseconds: float


class Retriever:
    """Embeds queries (through the cache) and runs the store query for a mode."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        cache: SearchCache,
        sparse: SparseEncoder,
        depth: int,
        batcher: QueryBatcher | None = None,
        feedback: Feedback = Feedback(),
    ) -> None:
        self._embedder = embedder
        # Concurrent searches share model calls.
        self._batcher = batcher or QueryBatcher(embedder.embed_queries)
        self._store = store
        self._cache = cache
        self._sparse = sparse
        self._depth = depth
        self._feedback = feedback

    async def embed(self, query: str) -> QueryVector:
        """The query's dense vector, from the cache or the model."""
        started = time.perf_counter()
        model = self._embedder.model_id
        cached = await self._cache.get_embedding(model, query)
        if cached is not None and cached.shape == (self._embedder.dimensions,):
            return QueryVector(cached, True, _ms(started))
        vector = await self._batcher.embed(query)
        await self._cache.set_embedding(model, query, vector)
        return QueryVector(vector, False, _ms(started))

    async def retrieve(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        *,
        mode: RetrievalMode,
        limit: int,
        threshold: float,
        fusion: FusionParams,
        previous: Retrieved | None = None,
        clock: Clock | None = None,
    ) -> Retrieved:
        """Up to `limit` chunks for the query, best first, filtered as the module docstring
        says. `previous` is this same search's answer for a smaller limit, to look deeper."""
        clock = clock or Clock()
        if mode is RetrievalMode.DENSE:
            with clock.step("ranking"):
                found = await self._store.search(
                    VectorQuery(scope, vector, limit, score_threshold=threshold or None, mode=mode)
                )
            return Retrieved(
                [
                    Candidate(hit, hit.score, f"semantic match (cosine {hit.score:.2f})")
                    for hit in found
                ],
                more=len(found) == limit,
            )
        sparse = self._sparse.query(query)
        if mode is RetrievalMode.SPARSE:
            with clock.step("ranking"):
                found = await self._store.search(
                    VectorQuery(scope, vector, limit, mode=mode, sparse=sparse)
                )
            return Retrieved(
                [
                    Candidate(hit, hit.score, f"keyword match (BM25 {hit.score:.2f})")
                    for hit in found
                ],
                more=len(found) == limit,
            )
        ranking = previous.ranking if previous is not None else None
        if ranking is None:
            with clock.step("ranking"):
                ranking = await self._rank(scope, query, vector, sparse, limit, fusion)
        return await self._hybrid(scope, query, vector, ranking, limit, threshold, clock)

    async def _rank(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        sparse: SparseVector,
        limit: int,
        fusion: FusionParams,
    ) -> HybridRanking:
        # Identifiers in the query: the store says which chunks hold each of their terms, so
        # that fusion can put the chunks holding every rare one first.
        probes = [term_index(term) for term in identifier_terms(query)]
        depth = max(self._depth, limit)
        params = for_query(query, fusion)
        feedback = self._feedback
        if not feedback.chunks or query_kind(query) is not QueryKind.QUESTION:
            rankings = await self._store.rank(
                scope, vector, sparse, depth, probes, fusion.probe_limit
            )
            return HybridRanking(fuse(rankings, params), {}, dict(rankings.dense))
        rankings = await self._store.rank(scope, vector, None, depth, probes, fusion.probe_limit)
        best = [point for point, _ in rankings.dense[: feedback.chunks]]
        cosines = dict(rankings.dense)
        found = await self._store.fetch(scope, best, vector, cosines) if best else []
        widened = with_feedback(
            sparse, [chunk.terms for chunk in found], feedback.weight, feedback.min_chunks
        )
        rankings = replace(rankings, sparse=await self._store.sparse_rank(scope, widened, depth))
        return HybridRanking(fuse(rankings, params), {c.point_id: c for c in found}, cosines)

    async def _hybrid(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        ranking: HybridRanking,
        limit: int,
        threshold: float,
        clock: Clock,
    ) -> Retrieved:
        best = ranking.fused[:limit]
        wanted = [f.point_id for f in best if f.point_id not in ranking.fetched]
        if wanted:
            with clock.step("fetch"):
                fetched = await self._store.fetch(scope, wanted, vector, ranking.cosines)
            found = {c.point_id: c for c in fetched}
            ranking.fetched.update({point_id: found.get(point_id) for point_id in wanted})
        # The query's terms, as sparse-vector indices: a chunk contains a term exactly when its
        # own sparse vector has that index, so no chunk text is tokenised again here.
        terms = {term_index(term) for term in tokens(query)}
        kept = []
        for fused in best:
            chunk = ranking.fetched[fused.point_id]
            if chunk is None:  # deleted or hidden since it was ranked
                continue
            cosine = chunk.score
            matched = terms & chunk.terms
            exact = (bool(terms) and matched == terms) or fused.lead == "identifier"
            if cosine < threshold and not exact:
                continue
            why = _why(fused, cosine, len(matched), terms)
            if cosine < threshold:
                why += " (kept as an exact keyword match below the similarity threshold)"
            kept.append(Candidate(chunk, fused.score, why))
        return Retrieved(kept, more=len(ranking.fused) > limit, ranking=ranking)


def _why(fused: Fused, cosine: float, matched: int, terms: set[int]) -> str:
    why = f"hybrid: semantic cosine {cosine:.2f}"
    if terms:
        why += f", {matched} of {len(terms)} query terms"
    if fused.lead == "identifier":
        why += "; first: it holds the query's rare identifiers"
    elif fused.lead == "keyword":
        why += "; first: its keyword match leads the rest by far"
    elif fused.lead == "semantic":
        why += "; first: its semantic match leads the rest by far"
    return why


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)

"""Retrieval: the query's vectors, the store query, and what the score threshold keeps.

`score_threshold` is a minimum cosine similarity in every mode, so a bot's setting means the
same thing whether it searches dense or hybrid:

- dense: chunks ranked by cosine; those below the threshold are dropped. `score` is the cosine.
- hybrid: the dense and the sparse (BM25) rankings are fused with reciprocal rank fusion in one
  store query. A fused chunk is kept if its cosine reaches the threshold, or if it contains
  every term of the query (an exact keyword match, which embeddings often miss: a part number,
  an error code, a rare name). `score` is the fused score scaled to 0..1, where 1 is first in
  both rankings.
- sparse (admin tooling only): BM25 alone, no threshold; `score` is the BM25 score.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from infra.embedding.base import Embedder
from infra.embedding.batching import QueryBatcher
from infra.search_cache import SearchCache
from infra.sparse import SparseEncoder, term_index, tokens
from infra.vectorstore.base import (
    RetrievalMode,
    ScoredChunk,
    SearchScope,
    VectorQuery,
    VectorStore,
)


@dataclass(frozen=True)
class Candidate:
    """A chunk that passed retrieval, with its score and why it was kept."""

    chunk: ScoredChunk
    score: float
    rationale: str


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
        prefetch: int,
        batcher: QueryBatcher | None = None,
    ) -> None:
        self._embedder = embedder
        # Concurrent searches share model calls.
        self._batcher = batcher or QueryBatcher(embedder.embed_queries)
        self._store = store
        self._cache = cache
        self._sparse = sparse
        self._prefetch = prefetch

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
        rrf_k: int,
    ) -> list[Candidate]:
        """Chunks for the query, best first, filtered as the module docstring says."""
        if mode is RetrievalMode.DENSE:
            found = await self._store.search(
                VectorQuery(scope, vector, limit, score_threshold=threshold or None, mode=mode)
            )
            return [
                Candidate(hit, hit.score, f"semantic match (cosine {hit.score:.2f})")
                for hit in found
            ]
        sparse = self._sparse.query(query)
        if mode is RetrievalMode.SPARSE:
            found = await self._store.search(
                VectorQuery(scope, vector, limit, mode=mode, sparse=sparse)
            )
            return [
                Candidate(hit, hit.score, f"keyword match (BM25 {hit.score:.2f})") for hit in found
            ]
        found = await self._store.search(
            VectorQuery(
                scope,
                vector,
                limit,
                mode=mode,
                sparse=sparse,
                rrf_k=rrf_k,
                prefetch=max(self._prefetch, limit),
            )
        )
        lists = 2 if sparse.indices else 1
        best_possible = lists / rrf_k
        # The query's terms, as sparse-vector indices: a chunk contains a term exactly when its
        # own sparse vector has that index, so no chunk text is tokenised again here.
        terms = {term_index(term) for term in tokens(query)}
        kept = []
        for hit in found:
            cosine = float(hit.dense @ vector) if hit.dense is not None else 0.0
            matched = terms & hit.terms
            every_term = bool(terms) and matched == terms
            if cosine < threshold and not every_term:
                continue
            why = f"hybrid: semantic cosine {cosine:.2f}"
            if terms:
                why += f", {len(matched)} of {len(terms)} query terms"
            if cosine < threshold:
                why += " (kept as an exact keyword match below the similarity threshold)"
            kept.append(Candidate(hit, round(min(1.0, hit.score / best_possible), 6), why))
        return kept


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)

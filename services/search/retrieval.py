"""Retrieval: the query's vector, one ranking call to the store, and what the score threshold
keeps.

A search asks the store twice at most: one ranking call (`VectorStore.rank`) brings every
candidate the retrievers rank, each with the few payload fields fusion and folding need and
never its text; once the answer's passages are chosen, one read (`read`) brings their texts.

`score_threshold` is a minimum cosine similarity in every mode, so a bot's setting means the
same thing whether it searches dense or hybrid:

- dense: chunks ranked by cosine, the threshold applied by the store. `score` is the cosine.
- hybrid: the dense and the sparse (BM25) rankings (`depth` chunks each) are fused
  (`services.search.fusion`); the same call scores the sparse ranking's chunks by cosine too,
  and says which query terms every ranked chunk holds. A fused chunk is kept if its cosine
  reaches the threshold, or if it is an exact keyword match, which embeddings often miss: it
  contains every term of the query, or every rare identifier the query names (a part number,
  an error code, a flag). `score` is the fused score, 0..1, where 1 is the best chunk of both
  rankings (or a chunk placed first for a strong signal). With pseudo-relevance feedback
  (`Feedback`, off by default), a question's keyword query first gains the terms its best
  semantic matches hold, and the store ranks again with the widened query (two ranking calls).
- sparse (admin tooling only): BM25 alone, no threshold; `score` is the BM25 score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from core.filters import SearchScope
from infra.embedding.base import Embedder
from infra.embedding.batching import QueryBatcher
from infra.sparse import SparseEncoder, identifier_terms, term_index, tokens, with_feedback
from infra.vectorstore.base import (
    RankedChunk,
    Rankings,
    RankQuery,
    RetrievalMode,
    SparseVector,
    VectorStore,
)
from schemas.chunks import ChunkPayload
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
    """A chunk that passed retrieval: what the ranking call brought of it, its score, why it
    was kept, and its place in the ranking it came from (fused, dense or sparse), before the
    threshold."""

    chunk: RankedChunk
    score: float
    rationale: str
    position: int


@dataclass(frozen=True)
class Retrieved:
    """The candidates, best first; in hybrid mode also the fused ranking they come from."""

    candidates: list[Candidate]
    # How many chunks were ranked (a window of that many or more holds every candidate).
    ranked: int
    fused: list[Fused] | None = None


class Retriever:
    """Embeds queries and runs the store's ranking call and read for a mode."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        sparse: SparseEncoder,
        depth: int,
        batcher: QueryBatcher | None = None,
        feedback: Feedback = Feedback(),
    ) -> None:
        self._embedder = embedder
        # Concurrent searches share model calls.
        self._batcher = batcher or QueryBatcher(embedder.embed_queries)
        self._store = store
        self._sparse = sparse
        self._depth = depth
        self._feedback = feedback

    @property
    def model_id(self) -> str:
        """The query model's id (query vectors are cached under it)."""
        return self._embedder.model_id

    @property
    def dimensions(self) -> int:
        """The size of a query vector."""
        return self._embedder.dimensions

    async def embed(self, query: str) -> NDArray[np.float32]:
        """The query's dense vector, from the model (in a batch with concurrent queries)."""
        return await self._batcher.embed(query)

    async def retrieve(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        *,
        mode: RetrievalMode,
        threshold: float,
        fusion: FusionParams,
    ) -> Retrieved:
        """Every chunk the store ranks for the query (`depth` per retriever), best first,
        filtered as the module docstring says: one ranking call (two with feedback)."""
        if mode is RetrievalMode.DENSE:
            rankings = await self._store.rank(
                RankQuery(scope, vector, self._depth, mode, threshold=threshold or None)
            )
            return _single(rankings, rankings.dense, "semantic match (cosine {:.2f})")
        sparse = self._sparse.query(query)
        if mode is RetrievalMode.SPARSE:
            rankings = await self._store.rank(
                RankQuery(scope, vector, self._depth, mode, sparse=sparse)
            )
            return _single(rankings, rankings.sparse, "keyword match (BM25 {:.2f})")
        rankings = await self._rank(scope, query, vector, sparse, fusion)
        fused = fuse(rankings, for_query(query, fusion))
        return Retrieved(_hybrid(query, rankings, fused, threshold), len(fused), fused)

    async def read(self, scope: SearchScope, point_ids: list[str]) -> dict[str, ChunkPayload]:
        """The chosen chunks' payloads (their texts), those still in scope: one read."""
        return await self._store.read(scope, point_ids)

    async def _rank(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        sparse: SparseVector,
        fusion: FusionParams,
    ) -> Rankings:
        # Identifiers in the query: the store says which chunks hold each of their terms, so
        # that fusion can put the chunks holding every rare one first.
        probes = tuple(term_index(term) for term in identifier_terms(query))
        ranking = RankQuery(
            scope,
            vector,
            self._depth,
            RetrievalMode.HYBRID,
            sparse=sparse,
            probes=probes,
            probe_limit=fusion.probe_limit,
        )
        rankings = await self._store.rank(ranking)
        feedback = self._feedback
        if not feedback.chunks or query_kind(query) is not QueryKind.QUESTION:
            return rankings
        best = [rankings.chunks[point] for point, _ in rankings.dense[: feedback.chunks]]
        widened = with_feedback(
            sparse, [chunk.terms for chunk in best], feedback.weight, feedback.min_chunks
        )
        again = await self._store.rank(RankQuery(**{**vars(ranking), "sparse": widened}))
        return Rankings(
            dense=rankings.dense,
            sparse=again.sparse,
            holding=rankings.holding,
            chunks={**again.chunks, **rankings.chunks},
            cosines={**again.cosines, **rankings.cosines},
        )


def _single(rankings: Rankings, ranked: list[tuple[str, float]], why: str) -> Retrieved:
    """One retriever's ranking as candidates, in its order."""
    return Retrieved(
        [
            Candidate(rankings.chunks[point], score, why.format(score), position)
            for position, (point, score) in enumerate(ranked)
        ],
        len(ranked),
    )


def _hybrid(
    query: str, rankings: Rankings, fused: list[Fused], threshold: float
) -> list[Candidate]:
    """The fused chunks that pass: a cosine at the threshold, or an exact keyword match."""
    # The query's terms, as sparse-vector indices: a chunk contains a term exactly when its own
    # sparse vector has that index, so no chunk text is tokenised here.
    terms = {term_index(term) for term in tokens(query)}
    kept = []
    for position, point in enumerate(fused):
        chunk = rankings.chunks.get(point.point_id)
        if chunk is None:  # a probe's find, ranked by neither retriever
            continue
        # A chunk neither ranking scored by cosine is below the dense ranking's last.
        cosine = rankings.cosines.get(point.point_id, 0.0)
        matched = terms & chunk.terms
        exact = (bool(terms) and matched == terms) or point.lead == "identifier"
        if cosine < threshold and not exact:
            continue
        why = _why(point, cosine, len(matched), terms)
        if cosine < threshold:
            why += " (kept as an exact keyword match below the similarity threshold)"
        kept.append(Candidate(chunk, point.score, why, position))
    return kept


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

"""Retrieval: the query's vector, one ranking call to the store, and what the score threshold
keeps.

A search asks the store twice at most: one ranking call (`VectorStore.rank`) brings every
candidate the retrievers rank, each with the few payload fields fusion and folding need and
never its text; once the answer's passages are chosen, one read (`read`) brings their texts.

`score_threshold` is a minimum cosine similarity in every mode, so a bot's setting means the
same thing whether it searches dense or hybrid:

- dense: chunks ranked by cosine, the threshold applied by the store. `score` is the cosine.
- hybrid: the dense ranking (the chunks whose cosine reaches the threshold, applied by the
  store) and the sparse (BM25) ranking, `depth` chunks each, are fused
  (`services.search.fusion`). A fused chunk is kept if it is in the dense ranking, or if it is
  an exact keyword match, which embeddings often miss: it contains every term of the query
  (the sparse ranking brings the terms each of its chunks holds), or every rare identifier the
  query names (a part number, an error code, a flag). A chunk outside the dense ranking is
  taken to be below the threshold (it is below the dense ranking's last). `score` is the fused
  score, 0..1, where 1 is the best chunk of both rankings (or a chunk placed first for a strong
  signal). With pseudo-relevance feedback (`Feedback`, off by default), a question's keyword
  query first gains the terms its best semantic matches hold, read for it, and the store ranks
  again with the widened query (two ranking calls and a read before the answer's read).
- sparse (admin tooling only): BM25 alone, no threshold; `score` is the BM25 score.

Why a chunk was kept (`Candidate.rationale`) is written for the answer's passages only, from
what the read brings of them (the terms they hold, their cosine where the ranking did not
bring it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    StoredChunk,
    VectorStore,
)
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
    """A chunk that passed retrieval: what the ranking call brought of it, its score, its
    cosine with the query if the ranking brought it, and its place in the ranking it came from
    (fused, dense or sparse), before the threshold; in hybrid mode its place in the fusion and
    whether it was kept as an exact keyword match below the threshold."""

    chunk: RankedChunk
    score: float
    position: int
    mode: RetrievalMode
    cosine: float | None = None
    fused: Fused | None = None
    below_threshold: bool = False

    def rationale(self, cosine: float | None, matched: int, terms: int) -> str:
        """Why it was kept, given its cosine and how many of the query's `terms` it holds."""
        if self.mode is RetrievalMode.DENSE:
            return f"semantic match (cosine {self.score:.2f})"
        if self.mode is RetrievalMode.SPARSE:
            return f"keyword match (BM25 {self.score:.2f})"
        why = f"hybrid: semantic cosine {cosine or 0.0:.2f}"
        if terms:
            why += f", {matched} of {terms} query terms"
        lead = self.fused.lead if self.fused is not None else None
        if lead == "identifier":
            why += "; first: it holds the query's rare identifiers"
        elif lead == "keyword":
            why += "; first: its keyword match leads the rest by far"
        elif lead == "semantic":
            why += "; first: its semantic match leads the rest by far"
        if self.below_threshold:
            why += " (kept as an exact keyword match below the similarity threshold)"
        return why


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
        at_least = threshold or None
        if mode is RetrievalMode.DENSE:
            rankings = await self._store.rank(
                RankQuery(scope, vector, self._depth, mode, threshold=at_least)
            )
            return _single(rankings, rankings.dense, mode)
        sparse = self._sparse.query(query)
        if mode is RetrievalMode.SPARSE:
            rankings = await self._store.rank(
                RankQuery(scope, vector, self._depth, mode, sparse=sparse)
            )
            return _single(rankings, rankings.sparse, mode)
        rankings = await self._rank(scope, query, vector, sparse, fusion, at_least)
        fused = fuse(rankings, for_query(query, fusion))
        return Retrieved(_hybrid(query, rankings, fused, threshold), len(fused), fused)

    async def read(
        self, scope: SearchScope, point_ids: list[str], dense: bool = False
    ) -> dict[str, StoredChunk]:
        """The chosen chunks (their payloads and terms; with `dense` their vectors), those
        still in scope: one read."""
        return await self._store.read(scope, point_ids, dense)

    async def _rank(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        sparse: SparseVector,
        fusion: FusionParams,
        threshold: float | None,
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
            threshold=threshold,
            probes=probes,
            probe_limit=fusion.probe_limit,
        )
        rankings = await self._store.rank(ranking)
        feedback = self._feedback
        if not feedback.chunks or query_kind(query) is not QueryKind.QUESTION:
            return rankings
        best = [point for point, _ in rankings.dense[: feedback.chunks]]
        read = await self._store.read(scope, best) if best else {}
        widened = with_feedback(
            sparse, [chunk.terms for chunk in read.values()], feedback.weight, feedback.min_chunks
        )
        again = await self._store.rank(replace(ranking, sparse=widened))
        return Rankings(
            dense=rankings.dense,
            sparse=again.sparse,
            holding=rankings.holding,
            chunks={**again.chunks, **rankings.chunks},
        )


def query_terms(query: str) -> frozenset[int]:
    """The query's terms, as sparse-vector indices: a chunk contains a term exactly when its
    own sparse vector has that index, so no chunk text is tokenised to tell."""
    return frozenset(term_index(term) for term in tokens(query))


def _single(rankings: Rankings, ranked: list[tuple[str, float]], mode: RetrievalMode) -> Retrieved:
    """One retriever's ranking as candidates, in its order."""
    return Retrieved(
        [
            Candidate(
                rankings.chunks[point],
                score,
                position,
                mode,
                cosine=score if mode is RetrievalMode.DENSE else None,
            )
            for position, (point, score) in enumerate(ranked)
        ],
        len(ranked),
    )


def _hybrid(
    query: str, rankings: Rankings, fused: list[Fused], threshold: float
) -> list[Candidate]:
    """The fused chunks that pass: in the dense ranking (at the threshold), or an exact keyword
    match."""
    terms = query_terms(query)
    cosines = rankings.cosines
    kept = []
    for position, point in enumerate(fused):
        chunk = rankings.chunks[point.point_id]
        cosine = cosines.get(point.point_id)
        close = threshold <= 0 if cosine is None else cosine >= threshold
        below = False
        if not close:
            held = chunk.terms or frozenset()
            exact = (bool(terms) and terms <= held) or point.lead == "identifier"
            if not exact:
                continue
            below = True
        kept.append(
            Candidate(chunk, point.score, position, RetrievalMode.HYBRID, cosine, point, below)
        )
    return kept

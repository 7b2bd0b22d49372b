"""Retrieval: the query's vector, one ranking call to the store, the reads of the chunks a
search looks at, and what the score threshold (a minimum cosine in every mode) keeps. How the
modes rank and what `score` means in each: docs/concepts/search.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from core.filters import SearchScope
from core.retrieval import RetrievalMode
from core.sparse import (
    SparseEncoder,
    holds_every,
    identifier_terms,
    term_index,
    term_set,
    tokens,
    unpacked_terms,
    with_feedback,
)
from infra.embedding.base import Embedder
from infra.embedding.batching import QueryBatcher
from infra.vectorstore.base import (
    Rankings,
    RankQuery,
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
    `weight` (`core.sparse.with_feedback`). No chunks: none."""

    chunks: int = 0
    min_chunks: int = 2
    weight: float = 0.3


@dataclass(frozen=True)
class Ranked:
    """A search's ranking, before any chunk is read: point ids best first (fused, in hybrid
    mode) with their scores, the cosines the dense ranking brought (every chunk at the
    threshold, unless it is `full`: then its last is above it), and in hybrid mode what fusion
    made of each chunk and the query's terms."""

    mode: RetrievalMode
    order: list[str]
    scores: dict[str, float]
    threshold: float
    cosines: dict[str, float] = field(default_factory=dict)
    full: bool = False
    fused: dict[str, Fused] = field(default_factory=dict)
    terms: frozenset[int] = frozenset()

    def window(self, passing: int, most: int) -> int:
        """How many of the first chunks hold `passing` chunks sure to pass the threshold (in
        the dense ranking), at most `most`: what a search reads first."""
        if self.mode is not RetrievalMode.HYBRID or self.threshold <= 0:
            return min(passing, most)
        sure = 0
        for position, point in enumerate(self.order[:most]):
            sure += point in self.cosines
            if sure >= passing:
                return position + 1
        return min(len(self.order), most)

    def unread(self, window: int, stored: Mapping[str, object]) -> list[str]:
        """The chunks among the first `window` that are not read yet."""
        return [point for point in self.order[:window] if point not in stored]

    def without_cosine(self, point_ids: list[str]) -> list[str]:
        """Those of the chunks whose cosine decides whether they pass but the ranking did not
        bring (their vectors are read with them): in a hybrid search whose dense ranking is full
        or that has no threshold. Otherwise a chunk outside the dense ranking is below the
        threshold whatever its cosine (it passes only as an exact keyword match), and its
        vector is read only if it is shown (`Retriever.with_cosines`): measured on the 100k
        benchmark store, reading about 93 vectors with every search cost 0.5 ms of 2.4."""
        if self.mode is not RetrievalMode.HYBRID or not (self.full or self.threshold <= 0):
            return []
        return [point for point in point_ids if point not in self.cosines]

    def candidates(
        self, window: int, stored: Mapping[str, StoredChunk | None], query: NDArray[np.float32]
    ) -> list[Candidate]:
        """The first `window` chunks that are still there and pass (the module docstring says
        what passes), best first."""
        kept = []
        for position, point in enumerate(self.order[:window]):
            chunk = stored.get(point)
            if chunk is None:  # deleted or hidden since it was ranked
                continue
            candidate = self._candidate(point, position, chunk, query)
            if candidate is not None:
                kept.append(candidate)
        return kept

    def _candidate(
        self, point: str, position: int, chunk: StoredChunk, query: NDArray[np.float32]
    ) -> Candidate | None:
        score = self.scores[point]
        if self.mode is not RetrievalMode.HYBRID:
            cosine = score if self.mode is RetrievalMode.DENSE else None
            return Candidate(point, chunk, score, position, self.mode, cosine)
        cosine = self.cosines.get(point)
        fused = self.fused[point]
        if cosine is None and (self.full or self.threshold <= 0):
            cosine = _cosine(chunk.dense, query)
        # Outside a dense ranking that is not full, a chunk is below the threshold.
        below = cosine < self.threshold if cosine is not None else True
        if below and not self._exact(chunk, fused):
            return None
        return Candidate(point, chunk, score, position, self.mode, cosine, fused, below)

    def _exact(self, chunk: StoredChunk, fused: Fused) -> bool:
        """Whether a chunk is an exact keyword match (kept below the threshold)."""
        if fused.lead == "identifier":
            return True
        return bool(self.terms) and holds_terms(chunk, self.terms)


@dataclass(frozen=True)
class Candidate:
    """A chunk that passed retrieval: as read, with its score, its place in the ranking it came
    from (fused, dense or sparse) before the threshold, and its cosine with the query if it is
    known (the dense ranking's); in hybrid mode what fusion made of it and whether it was kept
    as an exact keyword match below the threshold."""

    point_id: str
    chunk: StoredChunk
    score: float
    position: int
    mode: RetrievalMode
    cosine: float | None = None
    fused: Fused | None = None
    below_threshold: bool = False

    def rationale(self, terms: frozenset[int], query: NDArray[np.float32]) -> str:
        """Why it was kept, for a query of these terms and this vector."""
        if self.mode is RetrievalMode.DENSE:
            return f"semantic match (cosine {self.score:.2f})"
        if self.mode is RetrievalMode.SPARSE:
            return f"keyword match (BM25 {self.score:.2f})"
        cosine = self.cosine if self.cosine is not None else _cosine(self.chunk.dense, query)
        why = f"hybrid: semantic cosine {cosine:.2f}"
        if terms:
            why += f", {len(terms & terms_of(self.chunk))} of {len(terms)} query terms"
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


class Retriever:
    """Embeds queries, ranks with the store for a mode, and reads the chunks a search looks at."""

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

    async def rank(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        *,
        mode: RetrievalMode,
        threshold: float,
        fusion: FusionParams,
    ) -> Ranked:
        """The store's ranking for the query (`depth` chunks per retriever, the dense one at
        the threshold), fused in hybrid mode: one ranking call (more with feedback)."""
        at_least = threshold or None
        if mode is not RetrievalMode.HYBRID:
            sparse = self._sparse.query(query) if mode is RetrievalMode.SPARSE else None
            rankings = await self._store.rank(
                RankQuery(scope, vector, self._depth, mode, sparse=sparse, threshold=at_least)
            )
            ranking = rankings.dense if mode is RetrievalMode.DENSE else rankings.sparse
            return Ranked(mode, [point for point, _ in ranking], dict(ranking), threshold)
        rankings = await self._hybrid(scope, query, vector, fusion, at_least)
        fused = fuse(rankings, for_query(query, fusion))
        return Ranked(
            mode,
            [point.point_id for point in fused],
            {point.point_id: point.score for point in fused},
            threshold,
            cosines=dict(rankings.dense),
            full=len(rankings.dense) >= self._depth,
            fused={point.point_id: point for point in fused},
            terms=query_terms(query),
        )

    async def read(
        self,
        scope: SearchScope,
        ranked: Ranked,
        window: int,
        stored: dict[str, StoredChunk | None],
    ) -> None:
        """Reads the first `window` chunks of the ranking not read yet into `stored` (None for
        one no longer in scope): one read."""
        wanted = ranked.unread(window, stored)
        if wanted:
            found = await self._store.read(scope, wanted, ranked.without_cosine(wanted))
            stored |= {point: found.get(point) for point in wanted}

    async def with_cosines(
        self, scope: SearchScope, shown: list[Candidate], query: NDArray[np.float32]
    ) -> list[Candidate]:
        """The candidates shown, each with its cosine with the query (its rationale says it):
        one read of the vectors of those whose cosine is not known yet."""
        missing = [
            candidate.point_id
            for candidate in shown
            if candidate.mode is RetrievalMode.HYBRID
            and candidate.cosine is None
            and candidate.chunk.dense is None
        ]
        if not missing:
            return shown
        found = await self._store.read(scope, missing, missing)
        return [
            replace(candidate, cosine=_cosine(found[candidate.point_id].dense, query))
            if candidate.point_id in found
            else candidate
            for candidate in shown
        ]

    async def _hybrid(
        self,
        scope: SearchScope,
        query: str,
        vector: NDArray[np.float32],
        fusion: FusionParams,
        threshold: float | None,
    ) -> Rankings:
        # Identifiers in the query: the store says which chunks hold each of their terms, so
        # that fusion can put the chunks holding every rare one first.
        probes = tuple(term_index(term) for term in identifier_terms(query))
        sparse = self._sparse.query(query)
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
            sparse,
            [terms_of(chunk) for chunk in read.values()],
            feedback.weight,
            feedback.min_chunks,
        )
        again = await self._store.rank(replace(ranking, sparse=widened))
        return replace(rankings, sparse=again.sparse)


def terms_of(chunk: StoredChunk) -> frozenset[int]:
    """The terms a chunk holds, from its payload (read from its text for a chunk indexed
    before payloads held them)."""
    stored = chunk.raw.get("terms")
    if isinstance(stored, str) and stored:
        return unpacked_terms(stored)
    return term_set(chunk.payload.embedding_text)


def holds_terms(chunk: StoredChunk, terms: frozenset[int]) -> bool:
    """Whether a chunk holds every one of the terms."""
    stored = chunk.raw.get("terms")
    if isinstance(stored, str) and stored:
        return holds_every(stored, terms)
    return terms <= terms_of(chunk)


def query_terms(query: str) -> frozenset[int]:
    """The query's terms, as sparse-vector indices: a chunk contains a term exactly when its
    own sparse vector has that index, so no chunk text is tokenised to tell."""
    return frozenset(term_index(term) for term in tokens(query))


def _cosine(dense: NDArray[np.float32] | None, query: NDArray[np.float32]) -> float:
    """The cosine similarity of a stored vector and the (unit) query vector (0 without one)."""
    if dense is None:
        return 0.0
    norm = float(np.linalg.norm(dense))
    return float(dense @ query) / norm if norm > 0 else 0.0

"""The vector store's interface: one small protocol, two implementations.

`QdrantServerStore` talks to a Qdrant server (production); `EdgeVectorStore` runs Qdrant's
embedded engine in-process (the local default). Both pass one contract test suite
(`tests/integration/test_vector_store_contract.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from core.filters import (
    Filter,
    SearchScope,
    chunks_from,
    chunks_of_document,
    older_versions,
    version_of,
)
from core.retrieval import RetrievalMode
from core.sparse import SparseVector
from schemas.chunks import ChunkPayload
from schemas.domain import Document

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
# How dense vectors are held: int8 scalar-quantised copies in RAM with the float originals on
# disk (read to rescore a query's candidates), or the floats in RAM; `auto` decides by the size
# of the store (the embedded engine; int8 on a Qdrant server).
Quantization = Literal["auto", "int8", "none"]
# The payload field a probe reads (`VectorStore.rank`).
DOCUMENT_ID = "document_id"


class IndexKind(StrEnum):
    """How a payload field is indexed."""

    KEYWORD = "keyword"
    BOOL = "bool"
    INTEGER = "integer"


# Payload fields with an index: searches, deletes and version swaps filter on them.
PAYLOAD_INDEXES: tuple[tuple[str, IndexKind], ...] = (
    ("tenant_id", IndexKind.KEYWORD),
    ("kb_id", IndexKind.KEYWORD),
    ("document_id", IndexKind.KEYWORD),
    ("source_key", IndexKind.KEYWORD),
    ("active", IndexKind.BOOL),
    ("readers", IndexKind.KEYWORD),
    ("version", IndexKind.INTEGER),
    ("chunk_index", IndexKind.INTEGER),
)


@dataclass(frozen=True)
class ChunkPoint:
    """One chunk to store: its point id, vectors and payload."""

    point_id: str
    dense: NDArray[np.float32]
    payload: ChunkPayload
    sparse: SparseVector | None = None

    @classmethod
    def from_record(cls, record: Any) -> ChunkPoint:
        """A point read back with its vectors and payload (a record of either Qdrant API)."""
        vectors = record.vector if isinstance(record.vector, dict) else {}
        sparse = vectors.get(SPARSE_VECTOR)
        return cls(
            point_id=str(record.id),
            dense=np.asarray(vectors[DENSE_VECTOR], dtype=np.float32),
            payload=ChunkPayload.from_store(record.payload),
            sparse=(
                SparseVector(indices=list(sparse.indices), values=list(sparse.values))
                if sparse is not None
                else None
            ),
        )


@dataclass(frozen=True)
class ScoredChunk:
    """A search result (`VectorStore.search`): the point, its score (cosine or BM25) and its
    payload."""

    point_id: str
    score: float
    payload: ChunkPayload
    terms: frozenset[int] = frozenset()

    @classmethod
    def from_point(cls, point: Any) -> ScoredChunk:
        """From a scored point of either Qdrant API (both have id, score, payload and vector)."""
        return cls(
            point_id=str(point.id),
            score=point.score,
            payload=ChunkPayload.from_store(point.payload),
            terms=_terms(point.vector if isinstance(point.vector, dict) else {}),
        )


def _terms(vectors: dict[str, Any]) -> frozenset[int]:
    indices = getattr(vectors.get(SPARSE_VECTOR), "indices", None)
    return frozenset(indices) if indices else frozenset()


@dataclass(frozen=True)
class PublishedDocument:
    """A version of a source that has all its chunks written and is to be shown."""

    tenant_id: str
    kb_id: str
    document_id: str
    source_key: str
    version: int
    keep_chunks: int
    # Who may read it now (`core.governance`): set on its chunks as they are shown.
    readers: tuple[str, ...]

    def shown_payload(self) -> dict[str, Any]:
        """What is set on the chunks that are shown."""
        return {"active": True, "readers": list(self.readers)}

    def selections(self) -> tuple[Filter, Filter, Filter]:
        """What publishing touches: the chunks to show, the chunks to hide (older versions of
        the source, deleted once the version is finished: `older_versions`), and the chunks
        to delete (the document's own from `keep_chunks` on)."""
        return (
            chunks_of_document(self.tenant_id, self.document_id),
            older_versions(self.tenant_id, self.kb_id, self.source_key, self.version),
            chunks_from(self.tenant_id, self.document_id, self.keep_chunks),
        )


# What is set on the chunks of older versions when a newer one is published.
HIDDEN_PAYLOAD: dict[str, Any] = {"active": False}


@dataclass(frozen=True)
class WithdrawnDocument:
    """A run of a document that failed, perhaps after it was published: its chunks go, and the
    version of its source that is live (finished) is shown again."""

    tenant_id: str
    kb_id: str
    document_id: str
    source_key: str
    # The live version of the source if it is an older one (its chunks were hidden when this
    # run was published); 0 when there is none, or it is this document itself.
    live_version: int

    @classmethod
    def run_of(cls, document: Document, live_version: int) -> WithdrawnDocument:
        """The failed run of `document`, whose source's live version is `live_version` (0:
        none)."""
        return cls(
            tenant_id=document.tenant_id,
            kb_id=document.kb_id,
            document_id=document.id,
            source_key=document.source_key,
            live_version=live_version if live_version < document.version else 0,
        )

    def selections(self) -> tuple[Filter, Filter | None]:
        """The chunks to delete, and those to show again (None: none)."""
        own = chunks_of_document(self.tenant_id, self.document_id)
        if self.live_version <= 0:
            return own, None
        return own, version_of(self.tenant_id, self.kb_id, self.source_key, self.live_version)


@dataclass(frozen=True)
class VectorQuery:
    """A query within a scope, by one retriever.

    dense: by cosine similarity, with `score_threshold` as the minimum cosine.
    sparse: by BM25 (sparse vectors with IDF), no threshold.
    (Hybrid retrieval fuses the two rankings in the search service: see `VectorStore.rank`.)
    exact: a dense query compares every vector in scope with the original (float) vectors,
    ignoring the HNSW index and the quantised vectors: slow, the reference that approximate
    search's recall is measured against.
    """

    scope: SearchScope
    dense: NDArray[np.float32]
    limit: int
    score_threshold: float | None = None
    mode: RetrievalMode = RetrievalMode.DENSE
    sparse: SparseVector | None = None
    exact: bool = False


class RankPart(StrEnum):
    """The parts of a ranking call (`RankQuery.parts`), each one query of the batch."""

    # The dense ranking: chunks by cosine similarity (at least the threshold).
    DENSE = "dense"
    # The sparse ranking: chunks by BM25.
    SPARSE = "sparse"
    # The chunks holding one probed term, with their documents.
    PROBE = "probe"


@dataclass(frozen=True)
class RankQuery:
    """One search's ranking call (`VectorStore.rank`): the ids and scores of the chunks in
    scope by each retriever the mode uses, `depth` of each (the dense ranking only the chunks
    whose cosine reaches `threshold`); in hybrid mode also up to `probe_limit` chunks holding
    each probed term, with their documents."""

    scope: SearchScope
    dense: NDArray[np.float32]
    depth: int
    mode: RetrievalMode = RetrievalMode.HYBRID
    sparse: SparseVector | None = None
    # The minimum cosine of the dense ranking's chunks (None: none).
    threshold: float | None = None
    probes: tuple[int, ...] = ()
    probe_limit: int = 0

    def parts(self) -> list[tuple[RankPart, int | None]]:
        """The queries of the batch, in order: each part, and the term a probe probes."""
        if not self.scope.kb_ids:
            return []
        has_terms = self.sparse is not None and bool(self.sparse.indices)
        if self.mode is RetrievalMode.DENSE:
            return [(RankPart.DENSE, None)]
        if self.mode is RetrievalMode.SPARSE:
            return [(RankPart.SPARSE, None)] if has_terms else []
        parts: list[tuple[RankPart, int | None]] = [(RankPart.DENSE, None)]
        if has_terms:
            parts.append((RankPart.SPARSE, None))
        return parts + [(RankPart.PROBE, term) for term in self.probes]


@dataclass(frozen=True)
class Rankings:
    """A ranking call's answer: each retriever's best points within a scope, best first, as
    (point id, score) pairs (cosine similarities for the dense one, BM25 scores for the sparse
    one); and for each probed term the points holding it with their documents, (point id,
    document id) pairs (at most the probe limit)."""

    dense: list[tuple[str, float]]
    sparse: list[tuple[str, float]]
    holding: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def from_answers(cls, query: RankQuery, answers: Sequence[Sequence[Any]]) -> Rankings:
        """From the answers to `query.parts()` (scored points of either Qdrant API; a probe's
        read with its `DOCUMENT_ID`)."""
        rankings = cls([], [])
        for (part, term), points in zip(query.parts(), answers, strict=True):
            if part is RankPart.PROBE:
                assert term is not None
                rankings.holding[term] = [
                    (str(p.id), str((p.payload or {}).get(DOCUMENT_ID, p.id))) for p in points
                ]
                continue
            scored = [(str(p.id), float(p.score)) for p in points]
            (rankings.dense if part is RankPart.DENSE else rankings.sparse).extend(scored)
        return rankings


class StoredChunk:
    """A chunk read by id (`VectorStore.read`): its payload as stored (`raw`) and validated
    (`payload`, only when asked for: most chunks a search reads are dropped by the threshold
    first), and its dense vector if it was read with it (also converted only when asked for:
    the engine's record is kept until then)."""

    def __init__(self, raw: dict[str, Any], dense: Any = None) -> None:
        self.raw = raw
        self._dense = dense

    @cached_property
    def payload(self) -> ChunkPayload:
        """The chunk's payload."""
        return ChunkPayload.from_store(self.raw)

    @cached_property
    def dense(self) -> NDArray[np.float32] | None:
        """The chunk's dense vector, if it was read with it."""
        if self._dense is None or isinstance(self._dense, np.ndarray):
            return self._dense
        vectors = getattr(self._dense, "vector", None)
        if not isinstance(vectors, dict) or DENSE_VECTOR not in vectors:
            return None
        return np.asarray(vectors[DENSE_VECTOR], dtype=np.float32)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (`infra.vectorstore.remote`): the vector, not the record.
        return (StoredChunk, (self.raw, self.dense))


def readable(
    records: Sequence[Any], scope: SearchScope, dense: Sequence[Any] = ()
) -> dict[str, StoredChunk]:
    """The points retrieved by id (either Qdrant API) that are still active chunks in `scope`,
    by point id, with the records of those in `dense` (retrieved with their dense vectors)."""
    selector = scope.filter()
    vectors = {str(record.id): record for record in dense}
    found = {}
    for record in records:
        # The bindings build a record's payload anew on each access: it is taken once.
        payload = record.payload or {}
        if selector.matches(payload):
            point_id = str(record.id)
            found[point_id] = StoredChunk(payload, vectors.get(point_id))
    return found


class VectorStore(Protocol):
    """What the pipeline and the search service need from a vector store."""

    async def ensure_collection(self) -> None:
        """Creates the collection and payload indexes if missing; checks the dimensions."""
        ...

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Writes points; an existing id is overwritten."""
        ...

    async def publish_document(self, document: PublishedDocument) -> None:
        """Makes a document's chunks searchable and, in the same step, hides the chunks of
        older versions of its source (to delete once the version is finished, or to show again
        if it fails: `withdraw_document`) and removes any of its own chunks numbered
        `keep_chunks` or above (left by an earlier run that had more)."""
        ...

    async def withdraw_document(self, document: WithdrawnDocument) -> None:
        """Deletes a failed run's chunks and, in the same step, shows the live older version
        of its source again."""
        ...

    async def delete(self, selector: Filter) -> None:
        """Deletes the points the filter selects (a document's: `chunks_of_document`)."""
        ...

    async def set_readers(self, selector: Filter, readers: Sequence[str]) -> None:
        """Sets who may read the points the filter selects (no vector is touched)."""
        ...

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        """Deletes points by id."""
        ...

    async def document_chunks(
        self, tenant_id: str, document_id: str, limit: int = 10_000
    ) -> list[ChunkPayload]:
        """The stored payloads of a document's chunks (active or not), by chunk index."""
        ...

    async def search(self, query: VectorQuery) -> list[ScoredChunk]:
        """The best active chunks in scope, best first (by exact search if `query.exact`)."""
        ...

    async def rank(self, query: RankQuery) -> Rankings:
        """The query's rankings (`RankQuery`), in one call to the engine."""
        ...

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        """Those of the points that are still active chunks in scope, by point id, with their
        payloads (and, for those in `dense`, their dense vectors): one call to the engine."""
        ...

    async def count(self, selector: Filter) -> int:
        """How many points the filter selects (exact)."""
        ...

    def export_points(
        self, selector: Filter | None, batch: int = 256
    ) -> AsyncIterator[list[ChunkPoint]]:
        """Every point the filter selects (all, without one), with its vectors and payload, in
        batches: what a backup keeps, and `upsert` writes back."""
        ...

    async def export_page(
        self, selector: Filter | None, batch: int, offset: str | None
    ) -> tuple[list[ChunkPoint], str | None]:
        """One batch of `export_points`, in point id order, from `offset` (None: the first),
        and where the next one starts (None: this was the last): a long copy resumes from it."""
        ...

    async def get_points(self, point_ids: Sequence[str]) -> list[ChunkPoint]:
        """Those of the points that exist, with their vectors and payloads, whatever they are
        (active or not): what a copy compares."""
        ...

    async def drop(self) -> None:
        """Deletes the store and everything in it (a generation retired or cancelled:
        `schemas.index_generations`); it is closed after."""
        ...

    async def close(self) -> None:
        """Releases the store (flushes the embedded engine)."""
        ...

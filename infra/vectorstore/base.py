"""The vector store's interface: one small protocol, two implementations.

`QdrantServerStore` talks to a Qdrant server (production); `EdgeVectorStore` runs Qdrant's
embedded engine in-process (the local default). Both pass one contract test suite
(`tests/integration/test_vector_store_contract.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
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
from schemas.chunks import ChunkPayload
from schemas.domain import Document

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "sparse"
# How dense vectors are held: int8 scalar-quantised copies in RAM with the float originals on
# disk (read to rescore a query's candidates), or the floats in RAM.
Quantization = Literal["int8", "none"]
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
class SparseVector:
    """Term weights keyed by term index (sorted, unique indices)."""

    indices: list[int]
    values: list[float]


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
    """A search result: the point, its score (cosine or BM25) and its payload, and for a
    fetched chunk the indices of its sparse vector (which query terms it contains)."""

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

    @classmethod
    def from_records(
        cls,
        records: Sequence[Any],
        query: NDArray[np.float32],
        scope: SearchScope,
        cosines: Mapping[str, float] | None = None,
    ) -> list[ScoredChunk]:
        """From points retrieved by id (either Qdrant API): those in `scope`, scored by their
        cosine similarity with the unit vector `query`: the one given in `cosines`, else
        computed from the point's dense vector (retrieved for the points without one)."""
        known = cosines or {}
        selector = scope.filter()
        visible = [record for record in records if selector.matches(record.payload or {})]
        if not visible:
            return []
        # Each record's vectors are converted once: the bindings build them anew on access.
        vectors = [record.vector if isinstance(record.vector, dict) else {} for record in visible]
        unknown = [i for i, record in enumerate(visible) if str(record.id) not in known]
        scores = [known.get(str(record.id), 0.0) for record in visible]
        if unknown:
            missing = np.zeros_like(query)
            dense = np.array(
                [vectors[i].get(DENSE_VECTOR, missing) for i in unknown], dtype=np.float32
            )
            norms = np.linalg.norm(dense, axis=1)
            computed = (dense @ query) / np.where(norms > 0, norms, 1.0)
            for i, cosine in zip(unknown, computed, strict=True):
                scores[i] = float(cosine)
        return [
            cls(
                point_id=str(record.id),
                score=score,
                payload=ChunkPayload.from_store(record.payload),
                terms=_terms(vector),
            )
            for record, vector, score in zip(visible, vectors, scores, strict=True)
        ]


def split_known(
    point_ids: Sequence[str], cosines: Mapping[str, float] | None
) -> tuple[list[Any], list[Any]]:
    """The points whose cosine is given, and the others (whose dense vectors must be read)."""
    known = cosines or {}
    return (
        [point for point in point_ids if point in known],
        [point for point in point_ids if point not in known],
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


class RetrievalMode(StrEnum):
    """Which retriever ranks the chunks."""

    DENSE = "dense"
    SPARSE = "sparse"
    HYBRID = "hybrid"


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


@dataclass(frozen=True)
class Rankings:
    """Each retriever's best points within a scope, best first: (point id, score) pairs,
    cosine similarities for the dense one and BM25 scores for the sparse one; and for each
    probed term, the points holding it with their documents, (point id, document id) pairs (at
    most the probe limit)."""

    dense: list[tuple[str, float]]
    sparse: list[tuple[str, float]]
    holding: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def from_batch(
        cls,
        ranked: list[list[tuple[str, float]]],
        held: list[list[tuple[str, str]]],
        probes: Sequence[int],
    ) -> Rankings:
        """From the answers of a batch query: dense, then sparse (if asked); and the probes'."""
        return cls(
            dense=ranked[0],
            sparse=ranked[1] if len(ranked) > 1 else [],
            holding=dict(zip(probes, held, strict=True)),
        )


def holder(point: Any) -> tuple[str, str]:
    """A probed point of either Qdrant API (read with its `DOCUMENT_ID`): its id and its
    document's."""
    return str(point.id), str((point.payload or {}).get(DOCUMENT_ID, point.id))


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

    async def rank(
        self,
        scope: SearchScope,
        dense: NDArray[np.float32],
        sparse: SparseVector | None,
        depth: int,
        probes: Sequence[int] = (),
        probe_limit: int = 0,
    ) -> Rankings:
        """The `depth` best active chunks in scope by each retriever, ids and scores only (no
        sparse ranking without query terms), and up to `probe_limit` chunks in scope holding
        each probed term, with their documents: all in one round trip."""
        ...

    async def sparse_rank(
        self, scope: SearchScope, sparse: SparseVector, depth: int
    ) -> list[tuple[str, float]]:
        """The `depth` best active chunks in scope by BM25 alone, (point id, score) pairs, best
        first (none without query terms)."""
        ...

    async def fetch(
        self,
        scope: SearchScope,
        point_ids: Sequence[str],
        dense: NDArray[np.float32],
        cosines: Mapping[str, float] | None = None,
    ) -> list[ScoredChunk]:
        """Those of the points that are still active chunks in scope, with their payloads,
        their cosine similarity with `dense` as score, and their sparse terms; in no order.
        A point's cosine given in `cosines` (a dense ranking's score) is taken as it is, and
        its dense vector is not read."""
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

    async def close(self) -> None:
        """Releases the store (flushes the embedded engine)."""
        ...

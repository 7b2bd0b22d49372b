"""Vector store on Qdrant's embedded engine (qdrant-edge-py): the local default.

The engine is single-process (it holds a lock on its write-ahead log), so exactly one process
opens it; in the local default that is the API process, which serves search and runs the index
stage. Its Python binding holds the GIL during every call, so calls run in a worker thread one
at a time, and HNSW optimisation runs only once writes have been idle for a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe
from numpy.typing import NDArray

from core.errors import PermanentError, ServiceUnavailable
from core.filters import (
    Condition,
    Filter,
    Match,
    MatchAny,
    Range,
    SearchScope,
    chunks_of_document,
)
from infra.metrics import VECTOR_STORE_OPTIMIZATIONS
from infra.vectorstore.base import (
    DENSE_VECTOR,
    DOCUMENT_ID,
    PAYLOAD_INDEXES,
    SPARSE_VECTOR,
    ChunkPoint,
    IndexKind,
    PublishedDocument,
    Rankings,
    RetrievalMode,
    ScoredChunk,
    SparseVector,
    VectorQuery,
    holder,
)
from schemas.chunks import ChunkPayload

log = logging.getLogger(__name__)
T = TypeVar("T")

_EDGE_INDEX = {
    IndexKind.KEYWORD: qe.PayloadSchemaType.Keyword,
    IndexKind.BOOL: qe.PayloadSchemaType.Bool,
    IndexKind.INTEGER: qe.PayloadSchemaType.Integer,
}


class EdgeVectorStore:
    """A `VectorStore` on an embedded Qdrant shard in a local directory."""

    def __init__(
        self,
        path: Path,
        dimensions: int,
        optimize_idle_s: float = 5.0,
        search_ef: int = 256,
        optimize_every_s: float = 120.0,
    ) -> None:
        self._path = path
        self._dense_params = qe.SearchParams(hnsw_ef=search_ef)
        self._dimensions = dimensions
        self._optimize_idle_s = optimize_idle_s
        self._optimize_every_s = optimize_every_s
        self._last_optimized = time.monotonic()
        self._shard: qe.EdgeShard | None = None
        # One call at a time: the binding holds the GIL anyway, and a sequence of writes
        # (e.g. activate one document, delete another) must not interleave with a search.
        self._lock = asyncio.Lock()
        self._dirty = False
        self._last_write = 0.0
        self._optimizer: asyncio.Task[None] | None = None

    async def ensure_collection(self) -> None:
        """Opens (or creates) the shard and its payload indexes; starts the idle optimiser."""
        if self._shard is not None:
            return
        self._shard = await asyncio.to_thread(self._open)
        self._optimizer = asyncio.create_task(self._optimize_when_idle())

    def _open(self) -> qe.EdgeShard:
        config = qe.EdgeConfig(
            vectors={
                DENSE_VECTOR: qe.EdgeVectorParams(
                    size=self._dimensions, distance=qe.Distance.Cosine
                )
            },
            sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        try:
            if self._path.exists() and any(self._path.iterdir()):
                shard = qe.EdgeShard.load(str(self._path))
                existing = shard.info()
                size = shard_dense_size(shard)
                if size is not None and size != self._dimensions:
                    shard.close()
                    raise PermanentError(
                        f"vector store at {self._path} holds {size}-dimensional vectors; "
                        f"the embedding model makes {self._dimensions}"
                    )
                log.info("opened vector store at %s (%d points)", self._path, existing.points_count)
            else:
                self._path.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(self._path), config)
        except PermanentError:
            raise
        except Exception as exc:
            raise ServiceUnavailable("vector store", f"cannot open {self._path}: {exc}") from exc
        indexed = set(shard.info().payload_schema)
        for name, kind in PAYLOAD_INDEXES:
            if name not in indexed:
                shard.update(qe.UpdateOperation.create_field_index(name, _EDGE_INDEX[kind]))
        return shard

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Writes points; an existing id is overwritten."""
        if not points:
            return
        edge_points = []
        for point in points:
            vector: dict[str, Any] = {DENSE_VECTOR: point.dense.tolist()}
            if point.sparse is not None and point.sparse.indices:
                vector[SPARSE_VECTOR] = qe.SparseVector(
                    indices=point.sparse.indices, values=point.sparse.values
                )
            edge_points.append(
                qe.Point(id=point.point_id, vector=vector, payload=point.payload.to_store())
            )
        await self._write(lambda shard: shard.update(qe.UpdateOperation.upsert_points(edge_points)))

    async def publish_document(self, document: PublishedDocument) -> None:
        """Shows the document, drops older versions and its own stale tail, atomically: all
        three run under the store's lock, so no search sees a state in between."""
        shown, older, tail = (edge_filter(selector) for selector in document.selections())
        operations = [
            qe.UpdateOperation.set_payload_by_filter(shown, document.shown_payload()),
            qe.UpdateOperation.delete_points_by_filter(older),
            qe.UpdateOperation.delete_points_by_filter(tail),
        ]

        def apply(shard: qe.EdgeShard) -> None:
            for operation in operations:
                shard.update(operation)

        await self._write(apply)

    async def delete(self, selector: Filter) -> None:
        """Deletes the points the filter selects."""
        native = edge_filter(selector)
        await self._write(
            lambda shard: shard.update(qe.UpdateOperation.delete_points_by_filter(native))
        )

    async def set_readers(self, selector: Filter, readers: Sequence[str]) -> None:
        """Sets who may read the points the filter selects (no vector is touched)."""
        operation = qe.UpdateOperation.set_payload_by_filter(
            edge_filter(selector), {"readers": list(readers)}
        )
        await self._write(lambda shard: shard.update(operation))

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        """Deletes points by id."""
        if not point_ids:
            return
        ids: list[Any] = list(point_ids)
        await self._write(lambda shard: shard.update(qe.UpdateOperation.delete_points(ids)))

    async def document_chunks(
        self, tenant_id: str, document_id: str, limit: int = 10_000
    ) -> list[ChunkPayload]:
        """The stored payloads of a document's chunks (active or not), by chunk index."""
        selector = edge_filter(chunks_of_document(tenant_id, document_id))

        def scroll(shard: qe.EdgeShard) -> list[ChunkPayload]:
            payloads: list[ChunkPayload] = []
            offset: Any = None
            while len(payloads) < limit:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=min(256, limit - len(payloads)),
                        filter=selector,
                        with_payload=True,
                    )
                )
                payloads.extend(ChunkPayload.from_store(record.payload) for record in records)
                if offset is None:
                    break
            return payloads

        found = await self._call(scroll)
        return sorted(found, key=lambda payload: payload.chunk_index)

    async def search(self, query: VectorQuery) -> list[ScoredChunk]:
        """The best active chunks in scope, by cosine (dense) or BM25 (sparse)."""
        if not query.scope.kb_ids:
            return []
        if query.mode is RetrievalMode.SPARSE:
            sparse = _sparse_query(query.sparse)
            if sparse is None:
                return []
            request = qe.QueryRequest(
                limit=query.limit,
                query=sparse,
                filter=edge_filter(query.scope.filter()),
                with_payload=True,
            )
        else:
            request = qe.QueryRequest(
                limit=query.limit,
                query=_dense_query(query.dense),
                filter=edge_filter(query.scope.filter()),
                params=self._dense_params,
                score_threshold=query.score_threshold,
                with_payload=True,
            )
        points = await self._call(lambda shard: shard.query(request))
        return [ScoredChunk.from_point(p) for p in points]

    async def rank(
        self,
        scope: SearchScope,
        dense: NDArray[np.float32],
        sparse: SparseVector | None,
        depth: int,
        probes: Sequence[int] = (),
        probe_limit: int = 0,
    ) -> Rankings:
        """Both retrievers' best ids and scores, in one batch call to the engine."""
        if not scope.kb_ids:
            return Rankings([], [])
        selector = edge_filter(scope.filter())
        requests = [
            qe.QueryRequest(
                limit=depth, query=_dense_query(dense), filter=selector, params=self._dense_params
            )
        ]
        sparse_query = _sparse_query(sparse)
        if sparse_query is not None:
            requests.append(qe.QueryRequest(limit=depth, query=sparse_query, filter=selector))
        for term in probes:
            probe = _sparse_query(SparseVector([term], [1.0]))
            requests.append(
                qe.QueryRequest(
                    limit=probe_limit, query=probe, filter=selector, with_payload=[DOCUMENT_ID]
                )
            )
        batch = qe.QueryBatchRequest(requests)
        answers = await self._call(lambda shard: shard.query_batch(batch))
        retrievers = len(answers) - len(probes)
        return Rankings.from_batch(
            [[(str(p.id), float(p.score)) for p in points] for points in answers[:retrievers]],
            [[holder(p) for p in points] for points in answers[retrievers:]],
            probes,
        )

    async def sparse_rank(
        self, scope: SearchScope, sparse: SparseVector, depth: int
    ) -> list[tuple[str, float]]:
        """The BM25 ranking's ids and scores."""
        query = _sparse_query(sparse)
        if query is None or not scope.kb_ids:
            return []
        request = qe.QueryRequest(limit=depth, query=query, filter=edge_filter(scope.filter()))
        points = await self._call(lambda shard: shard.query(request))
        return [(str(p.id), float(p.score)) for p in points]

    async def fetch(
        self, scope: SearchScope, point_ids: Sequence[str], dense: NDArray[np.float32]
    ) -> list[ScoredChunk]:
        """The points still in scope, scored by cosine with `dense`, with payload and terms.

        Retrieved by id and checked here: a filtered query over a list of ids costs several
        times as much in the engine."""
        if not point_ids or not scope.kb_ids:
            return []
        ids: list[Any] = list(point_ids)
        records = await self._call(
            lambda shard: shard.retrieve(ids, True, [DENSE_VECTOR, SPARSE_VECTOR])
        )
        return ScoredChunk.from_records(records, dense, scope)

    async def count(self, selector: Filter) -> int:
        """How many points the filter selects (exact)."""
        request = qe.CountRequest(filter=edge_filter(selector), exact=True)
        return await self._call(lambda shard: shard.count(request))

    async def optimize(self) -> None:
        """Builds the HNSW index now and drops deleted points (blocks other calls while it
        runs). The flush that follows releases the segments the optimisation replaced: until
        then their files stay on disk and mapped in memory, one more after every run."""
        await self._call(_optimize_and_flush)
        self._dirty = False
        self._last_optimized = time.monotonic()

    async def close(self) -> None:
        """Stops the optimiser, flushes and closes the shard."""
        if self._optimizer is not None:
            self._optimizer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._optimizer
            self._optimizer = None
        if self._shard is not None:
            async with self._lock:
                shard, self._shard = self._shard, None
                await asyncio.to_thread(_flush_and_close, shard)

    async def _write(self, fn: Callable[[qe.EdgeShard], T]) -> T:
        result = await self._call(fn)
        self._dirty = True
        self._last_write = time.monotonic()
        return result

    async def _call(self, fn: Callable[[qe.EdgeShard], T]) -> T:
        async with self._lock:
            shard = self._shard
            if shard is None:
                raise ServiceUnavailable("vector store", "the embedded store is not open")
            try:
                return await asyncio.to_thread(fn, shard)
            except (PermanentError, ServiceUnavailable):
                raise
            except Exception as exc:
                raise ServiceUnavailable("vector store", str(exc)) from exc

    async def _optimize_when_idle(self) -> None:
        """Optimises once writes pause for `optimize_idle_s`, and at least every
        `optimize_every_s` while they never do (else the store grows without end)."""
        while True:
            await asyncio.sleep(min(1.0, self._optimize_idle_s))
            if not self._dirty:
                continue
            now = time.monotonic()
            if now - self._last_write >= self._optimize_idle_s:
                trigger = "idle"
            elif now - self._last_optimized >= self._optimize_every_s:
                trigger = "interval"
            else:
                continue
            try:
                await self.optimize()
            except ServiceUnavailable as exc:
                log.warning("vector store optimisation failed: %s", exc)
                continue
            VECTOR_STORE_OPTIMIZATIONS.labels(trigger).inc()
            took = time.monotonic() - now
            if took > 1.0:
                log.info("vector store optimised in %.1f s (%s)", took, trigger)


def _optimize_and_flush(shard: qe.EdgeShard) -> None:
    shard.optimize()
    shard.flush()


def shard_dense_size(shard: qe.EdgeShard) -> int | None:
    """The dense vector size a shard was created with, if it has any points to tell."""
    records, _ = shard.scroll(qe.ScrollRequest(limit=1, with_vector=[DENSE_VECTOR]))
    if not records or not isinstance(records[0].vector, dict):
        return None
    dense = records[0].vector.get(DENSE_VECTOR)
    return len(dense) if isinstance(dense, list) else None


def _flush_and_close(shard: qe.EdgeShard) -> None:
    shard.flush()
    shard.close()


def edge_filter(selector: Filter) -> qe.Filter:
    """The engine's filter for a store-neutral one: the only translation in this module."""
    return qe.Filter(
        must=[_edge_condition(c) for c in selector.must] or None,
        should=[_edge_condition(c) for c in selector.should] or None,
        must_not=[_edge_condition(c) for c in selector.must_not] or None,
    )


def _edge_condition(condition: Condition) -> Any:
    match condition:
        case Match(key, value):
            # The binding turns a Python bool into an integer (bool subclasses int), which then
            # matches nothing; numpy's bool_ reaches the engine as a boolean.
            matched: Any = np.bool_(value) if isinstance(value, bool) else value
            return qe.FieldCondition(key=key, match=qe.MatchValue(matched))
        case MatchAny(key, values):
            return qe.FieldCondition(key=key, match=qe.MatchAny(list(values)))
        case Range(key, gte, lt):
            return qe.FieldCondition(key=key, range=qe.RangeFloat(gte=gte, lt=lt))
        case Filter():
            return edge_filter(condition)


def _dense_query(vector: NDArray[np.float32]) -> qe.Query:
    return qe.Query.Nearest(vector.tolist(), using=DENSE_VECTOR)


def _sparse_query(sparse: SparseVector | None) -> qe.Query | None:
    if sparse is None or not sparse.indices:
        return None
    vector = qe.SparseVector(indices=sparse.indices, values=sparse.values)
    return qe.Query.Nearest(vector, using=SPARSE_VECTOR)

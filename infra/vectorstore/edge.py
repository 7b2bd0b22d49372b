"""Vector store on Qdrant's embedded engine (qdrant-edge-py): the local default, opened by one
process (the API's). Calls run on the store's own threads; a write of several calls holds the
store alone (`publish_document`); rankings waiting together go as one batch; where vectors and
payloads live (RAM or disk) is chosen by the store's size (`Placement`). Why:
docs/concepts/vector-store.md."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import qdrant_edge as qe
from aiorwlock import RWLock
from numpy.typing import NDArray

from core.coalescing import Coalescer
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
from core.periodic import Periodic
from core.retrieval import RetrievalMode
from core.sparse import SparseVector
from infra.process.metrics import VECTOR_STORE_OPTIMIZATIONS
from infra.vectorstore.base import (
    DENSE_VECTOR,
    DOCUMENT_ID,
    HIDDEN_PAYLOAD,
    PAYLOAD_INDEXES,
    SPARSE_VECTOR,
    ChunkPoint,
    IndexKind,
    PublishedDocument,
    Quantization,
    Rankings,
    RankPart,
    RankQuery,
    ScoredChunk,
    StoredChunk,
    VectorQuery,
    WithdrawnDocument,
    readable,
)
from schemas.chunks import ChunkPayload

log = logging.getLogger(__name__)
T = TypeVar("T")

_EDGE_INDEX = {
    IndexKind.KEYWORD: qe.PayloadSchemaType.Keyword,
    IndexKind.BOOL: qe.PayloadSchemaType.Bool,
    IndexKind.INTEGER: qe.PayloadSchemaType.Integer,
}


@dataclass(frozen=True)
class Placement:
    """Where a store keeps its dense vectors (int8 copies, or the floats alone) and whether
    what a search reads (the floats, payloads, sparse index) is held in RAM."""

    quantization: Literal["int8", "none"]
    in_ram: bool

    @classmethod
    def of(cls, quantization: Quantization, points: int, in_ram_max_points: int) -> Placement:
        """The placement of a store of `points` points."""
        in_ram = points <= in_ram_max_points
        if quantization == "auto":
            return cls("none" if in_ram else "int8", in_ram)
        return cls(quantization, in_ram)

    def config(self, dimensions: int, optimizers: qe.EdgeOptimizersConfig | None) -> qe.EdgeConfig:
        """The engine's configuration for this placement."""
        held = qe.Memory.Cached if self.in_ram else qe.Memory.Cold
        if self.quantization == "int8":
            dense = qe.EdgeVectorParams(
                size=dimensions,
                distance=qe.Distance.Cosine,
                # The originals are read only to rescore a query's candidates.
                memory=held,
                quantization_config=qe.ScalarQuantizationConfig(
                    type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned
                ),
            )
        else:
            dense = qe.EdgeVectorParams(
                size=dimensions, distance=qe.Distance.Cosine, memory=qe.Memory.Cached
            )
        return qe.EdgeConfig(
            vectors={DENSE_VECTOR: dense},
            sparse_vectors={
                SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=held)
            },
            payload_memory=held,
            optimizers=optimizers,
        )


class EdgeVectorStore:
    """A `VectorStore` on an embedded Qdrant shard in a local directory."""

    def __init__(
        self,
        path: Path,
        dimensions: int,
        optimize_idle_s: float = 5.0,
        search_ef: int = 256,
        optimize_every_s: float = 120.0,
        quantization: Quantization = "auto",
        oversampling: float = 2.0,
        rank_batch_max: int = 32,
        rank_batch_wait_s: float = 0.0,
        indexing_threshold_kb: int | None = None,
        in_ram_max_points: int = 200_000,
        threads: int = 2,
    ) -> None:
        """`indexing_threshold_kb`: the size of vectors a segment takes before the optimiser
        indexes (and quantises) it; None keeps the engine's (10 MB, ~6,500 vectors of 384
        floats). Tests set it low to get indexed segments from a few points."""
        self._path = path
        self._dimensions = dimensions
        self._quantization: Quantization = quantization
        self._in_ram_max_points = in_ram_max_points
        self._thread_count = threads
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_ef = search_ef
        self._oversampling = oversampling
        self.placement = Placement.of(quantization, 0, in_ram_max_points)
        self._dense_params = self._search_params()
        self._exact_params = qe.SearchParams(
            exact=True, quantization=qe.QuantizationSearchParams(ignore=True)
        )
        self._optimize_idle_s = optimize_idle_s
        self._optimize_every_s = optimize_every_s
        self._last_optimized = time.monotonic()
        self._shard: qe.EdgeShard | None = None
        # Shared use (searches, writes of points) or exclusive use (a publication, the closing);
        # an exclusive user waiting goes before shared ones arriving after it, so a stream of
        # searches cannot hold a publication back.
        self._gate = RWLock(fast=True)
        self._threads: ThreadPoolExecutor | None = None
        self._rankings: Coalescer[qe.QueryRequest, list[Any]] = Coalescer(
            self._query_batch,
            max_batch=rank_batch_max,
            max_wait_s=rank_batch_wait_s,
            # The engine answers a batch on one thread: batches run beside each other on the
            # store's threads.
            in_flight=threads,
            isolate=(ServiceUnavailable,),
        )
        # Writes made, and how many of them the last optimisation had seen when it began.
        self._writes = 0
        self._optimized_writes = 0
        self._last_write = 0.0
        self._optimizer = Periodic(
            "optimising the vector store", min(1.0, self._optimize_idle_s), self._optimize_when_idle
        )

    async def ensure_collection(self) -> None:
        """Opens (or creates) the shard and its payload indexes; starts the idle optimiser."""
        if self._shard is not None:
            return
        shard = await asyncio.to_thread(self._open)
        if self.placement.in_ram:
            # The engine keeps some files (the sparse vectors') only memory-mapped: they are read
            # once now, so that a search's first read of a chunk is not a disk read (at 100,000
            # chunks: 1 GB, under a second).
            await asyncio.to_thread(_read_ahead, self._path)
        self._threads = ThreadPoolExecutor(self._thread_count, thread_name_prefix="edge-store")
        self._shard = shard
        self._dense_params = self._search_params()
        self._optimizer.start()

    def _search_params(self) -> qe.SearchParams:
        quantised = self.placement.quantization == "int8"
        return qe.SearchParams(
            hnsw_ef=self._search_ef,
            quantization=(
                qe.QuantizationSearchParams(rescore=True, oversampling=self._oversampling)
                if quantised
                else None
            ),
        )

    def _config(self) -> qe.EdgeConfig:
        optimizers = None
        if self._indexing_threshold_kb is not None:
            optimizers = qe.EdgeOptimizersConfig(indexing_threshold=self._indexing_threshold_kb)
        return self.placement.config(self._dimensions, optimizers)

    def _open(self) -> qe.EdgeShard:
        try:
            if self._path.exists() and any(self._path.iterdir()):
                self.placement = Placement.of(
                    self._quantization, self._points(), self._in_ram_max_points
                )
                shard = self._load(self._config())
                log.info(
                    "opened vector store at %s (%d points, dense vectors: %s, in RAM: %s)",
                    self._path,
                    shard.info().points_count,
                    self.placement.quantization,
                    "all a search reads" if self.placement.in_ram else "int8 copies",
                )
            else:
                self._path.mkdir(parents=True, exist_ok=True)
                shard = qe.EdgeShard.create(str(self._path), self._config())
        except PermanentError:
            raise
        except Exception as exc:
            raise ServiceUnavailable("vector store", f"cannot open {self._path}: {exc}") from exc
        indexed = set(shard.info().payload_schema)
        for name, kind in PAYLOAD_INDEXES:
            if name not in indexed:
                shard.update(qe.UpdateOperation.create_field_index(name, _EDGE_INDEX[kind]))
        return shard

    def _points(self) -> int:
        """How many points the existing shard holds (opened as it was last configured)."""
        try:
            shard = qe.EdgeShard.load(str(self._path))
        except Exception:
            return 0  # the load with the chosen configuration says what is wrong
        try:
            return int(shard.info().points_count)
        finally:
            shard.close()

    def _load(self, config: qe.EdgeConfig) -> qe.EdgeShard:
        """Opens an existing shard with `config` (a shard made with other storage settings
        takes them; its vectors are kept), or says why its vectors do not fit."""
        try:
            return qe.EdgeShard.load(str(self._path), config)
        except Exception as exc:
            if "incompatible" not in str(exc):
                raise
            refused = exc
        shard = qe.EdgeShard.load(str(self._path))
        size = shard_dense_size(shard)
        shard.close()
        if size is not None and size != self._dimensions:
            raise PermanentError(
                f"vector store at {self._path} holds {size}-dimensional vectors; "
                f"the embedding model makes {self._dimensions}"
            )
        raise PermanentError(f"vector store at {self._path} does not fit: {refused}")

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
        """Shows the document, hides older versions and drops its own stale tail, atomically:
        the three calls hold the store exclusively, so no search sees a state in between (an
        older version beside the new one, or the stale tail shown)."""
        shown, older, tail = (edge_filter(selector) for selector in document.selections())
        operations = [
            qe.UpdateOperation.set_payload_by_filter(shown, document.shown_payload()),
            qe.UpdateOperation.set_payload_by_filter(older, HIDDEN_PAYLOAD),
            qe.UpdateOperation.delete_points_by_filter(tail),
        ]

        def apply(shard: qe.EdgeShard) -> None:
            for operation in operations:
                shard.update(operation)

        await self._write(apply, exclusive=True)

    async def withdraw_document(self, document: WithdrawnDocument) -> None:
        """Deletes the failed run's chunks and shows the live version again, atomically (the
        calls hold the store exclusively)."""
        own, live = document.selections()
        operations = [qe.UpdateOperation.delete_points_by_filter(edge_filter(own))]
        if live is not None:
            operations.append(
                qe.UpdateOperation.set_payload_by_filter(edge_filter(live), {"active": True})
            )

        def apply(shard: qe.EdgeShard) -> None:
            for operation in operations:
                shard.update(operation)

        await self._write(apply, exclusive=True)

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

        found = await self._read(scroll)
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
                params=_within(query.scope),
                with_payload=True,
            )
        else:
            request = qe.QueryRequest(
                limit=query.limit,
                query=_dense_query(query.dense),
                filter=edge_filter(query.scope.filter()),
                params=self._exact_params if query.exact else self._dense_params,
                score_threshold=query.score_threshold,
                with_payload=True,
            )
        points = await self._read(lambda shard: shard.query(request))
        return [ScoredChunk.from_point(p) for p in points]

    async def rank(self, query: RankQuery) -> Rankings:
        """The query's rankings in one batch call to the engine, shared with the searches
        ranking at the same moment."""
        parts = query.parts()
        if not parts:
            return Rankings([], [])
        selector = edge_filter(query.scope.filter())
        corpus = _within(query.scope)
        requests = []
        for part, term in parts:
            if part is RankPart.DENSE:
                request = qe.QueryRequest(
                    limit=query.depth,
                    query=_dense_query(query.dense),
                    filter=selector,
                    params=self._dense_params,
                    score_threshold=query.threshold,
                )
            elif part is RankPart.SPARSE:
                request = qe.QueryRequest(
                    limit=query.depth,
                    query=_sparse_query(query.sparse),
                    filter=selector,
                    params=corpus,
                )
            else:
                request = qe.QueryRequest(
                    limit=query.probe_limit,
                    query=_sparse_query(SparseVector([term or 0], [1.0])),
                    filter=selector,
                    with_payload=[DOCUMENT_ID],
                )
            requests.append(request)
        return Rankings.from_answers(query, await self._rankings.submit(requests))

    async def _query_batch(self, requests: list[qe.QueryRequest]) -> list[list[Any]]:
        batch = qe.QueryBatchRequest(requests)
        return await self._read(lambda shard: shard.query_batch(batch))

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        """The points still in scope, with payloads, and for those in `dense` their dense
        vectors (retrieved by id and checked here: a filtered query over a list of ids costs
        several times as much in the engine)."""
        if not point_ids or not scope.kb_ids:
            return {}
        ids: list[Any] = list(point_ids)
        vectors: list[Any] = [point for point in point_ids if point in dense]

        def retrieve(shard: qe.EdgeShard) -> tuple[list[Any], list[Any]]:
            records = shard.retrieve(ids, True, False)
            return records, shard.retrieve(vectors, False, [DENSE_VECTOR]) if vectors else []

        records, with_dense = await self._read(retrieve)
        return readable(records, scope, with_dense)

    async def get_points(self, point_ids: Sequence[str]) -> list[ChunkPoint]:
        """Those of the points that exist, with vectors and payloads."""
        if not point_ids:
            return []
        ids: list[Any] = list(point_ids)
        records = await self._read(lambda shard: shard.retrieve(ids, True, True))
        return [ChunkPoint.from_record(record) for record in records]

    async def export_points(
        self, selector: Filter | None, batch: int = 256
    ) -> AsyncIterator[list[ChunkPoint]]:
        """Every point the filter selects (all, without one), with its vectors and payload, in
        batches (each a call of its own: writes may come between them)."""
        offset: str | None = None
        while True:
            points, offset = await self.export_page(selector, batch, offset)
            if points:
                yield points
            if offset is None:
                return

    async def export_page(
        self, selector: Filter | None, batch: int, offset: str | None
    ) -> tuple[list[ChunkPoint], str | None]:
        """One batch of `export_points` from `offset` (None: the first), and where the next
        one starts (None: this was the last)."""
        request = qe.ScrollRequest(
            offset=offset,
            limit=batch,
            filter=edge_filter(selector) if selector is not None else None,
            with_payload=True,
            with_vector=True,
        )
        records, following = await self._read(lambda shard: shard.scroll(request))
        points = [ChunkPoint.from_record(record) for record in records]
        return points, None if following is None else str(following)

    async def count(self, selector: Filter) -> int:
        """How many points the filter selects (exact)."""
        request = qe.CountRequest(filter=edge_filter(selector), exact=True)
        return await self._read(lambda shard: shard.count(request))

    async def optimize(self) -> None:
        """Builds the HNSW index (and the quantised vectors) now and drops deleted points.

        The engine would let searches and writes go on meanwhile, and the store does not hold
        them back; but the binding holds the GIL until the optimisation ends, so nothing else
        in this process runs until then. The flush that follows releases the segments the
        optimisation replaced: until then their files stay on disk and mapped in memory, one
        more after every run."""
        writes = self._writes
        await self._call(_optimize_and_flush)
        self._optimized_writes = max(self._optimized_writes, writes)
        self._last_optimized = time.monotonic()

    async def close(self) -> None:
        """Answers the rankings under way, stops the optimiser, flushes and closes the shard."""
        await self._rankings.close()
        await self._optimizer.stop()
        if self._shard is not None:
            async with self._gate.writer_lock:
                shard, self._shard = self._shard, None
                await asyncio.to_thread(_flush_and_close, shard)
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None

    async def drop(self) -> None:
        """Closes the store and deletes its directory."""
        await self.close()
        await asyncio.to_thread(shutil.rmtree, self._path, True)
        log.info("dropped the vector store at %s", self._path)

    async def _read(self, fn: Callable[[qe.EdgeShard], T]) -> T:
        return await self._call(fn)

    async def _write(self, fn: Callable[[qe.EdgeShard], T], exclusive: bool = False) -> T:
        result = await self._call(fn, exclusive)
        self._writes += 1
        self._last_write = time.monotonic()
        return result

    async def _call(self, fn: Callable[[qe.EdgeShard], T], exclusive: bool = False) -> T:
        gate = self._gate.writer_lock if exclusive else self._gate.reader_lock
        async with gate:
            shard, threads = self._shard, self._threads
            if shard is None or threads is None:
                raise ServiceUnavailable("vector store", "the embedded store is not open")
            call = asyncio.get_running_loop().run_in_executor(threads, fn, shard)
            try:
                return await asyncio.shield(call)
            except asyncio.CancelledError:
                # A call under way cannot be stopped: the store stays in use until it returns
                # (so a publication or the closing waits for it), and its outcome is dropped.
                await asyncio.wait([call])
                if not call.cancelled():
                    call.exception()
                raise
            except (PermanentError, ServiceUnavailable):
                raise
            except Exception as exc:
                raise ServiceUnavailable("vector store", str(exc)) from exc

    async def _optimize_when_idle(self) -> None:
        """Optimises once writes pause for `optimize_idle_s`, and at least every
        `optimize_every_s` while they never do (else the store grows without end)."""
        if self._writes == self._optimized_writes:
            return
        now = time.monotonic()
        if now - self._last_write >= self._optimize_idle_s:
            trigger = "idle"
        elif now - self._last_optimized >= self._optimize_every_s:
            trigger = "interval"
        else:
            return
        try:
            await self.optimize()
        except ServiceUnavailable as exc:
            log.warning("vector store optimisation failed: %s", exc)
            return
        VECTOR_STORE_OPTIMIZATIONS.labels(trigger).inc()
        took = time.monotonic() - now
        if took > 1.0:
            log.info("vector store optimised in %.1f s (%s)", took, trigger)


def _read_ahead(path: Path) -> None:
    """Reads the store's segment files once, so that their pages are in the kernel's page cache
    (asking the kernel to read them ahead, `posix_fadvise`, was measured to leave most of them
    out)."""
    for file in (path / "segments").rglob("*"):
        if not file.is_file():
            continue
        with contextlib.suppress(OSError), file.open("rb") as handle:
            while handle.read(1 << 20):
                pass


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


def _within(scope: SearchScope) -> qe.SearchParams:
    """A sparse query's parameters: its terms' IDF counted over its tenant's chunks
    (`SearchScope.term_corpus`), not over the whole store."""
    return qe.SearchParams(idf=qe.IdfParams(corpus=edge_filter(scope.term_corpus())))


def _sparse_query(sparse: SparseVector | None) -> qe.Query | None:
    if sparse is None or not sparse.indices:
        return None
    vector = qe.SparseVector(indices=sparse.indices, values=sparse.values)
    return qe.Query.Nearest(vector, using=SPARSE_VECTOR)

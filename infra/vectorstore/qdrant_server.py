"""Vector store on a Qdrant server, through qdrant-client (production).

Searches' rankings that wait at the same moment go to the server as one `query_batch_points`
request (`coalescing.Coalescer`), a few requests in flight at once.

Dense vectors are stored as int8 scalar-quantised copies in RAM with the float originals on
disk (read to rescore the candidates) unless `quantization="none"` (`auto` is int8 here: the
server's memory is the operator's to size), and payloads on disk: a search filters by payload
indexes (in RAM) and reads only the payloads of the few dozen points it looks at. An existing
collection with other settings is updated in place (the server rebuilds its segments in the
background; the vectors stay as they are).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

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
from core.retrieval import RetrievalMode
from core.sparse import SparseVector
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

_QDRANT_INDEX = {
    IndexKind.KEYWORD: qm.PayloadSchemaType.KEYWORD,
    IndexKind.BOOL: qm.PayloadSchemaType.BOOL,
    IndexKind.INTEGER: qm.PayloadSchemaType.INTEGER,
}


@asynccontextmanager
async def _qdrant_errors() -> AsyncIterator[None]:
    try:
        yield
    except UnexpectedResponse as exc:
        if exc.status_code is not None and exc.status_code >= 500:
            raise ServiceUnavailable("qdrant", str(exc)) from exc
        raise PermanentError(f"qdrant rejected the request: {exc}") from exc
    except (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError) as exc:
        raise ServiceUnavailable("qdrant", str(exc)) from exc


_INT8 = qm.ScalarQuantization(
    scalar=qm.ScalarQuantizationConfig(type=qm.ScalarType.INT8, quantile=0.99, always_ram=True)
)


class QdrantServerStore:
    """A `VectorStore` on one collection of a Qdrant server."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        collection: str,
        dimensions: int,
        search_ef: int = 256,
        quantization: Quantization = "int8",
        oversampling: float = 2.0,
        rank_batch_max: int = 32,
        rank_batch_wait_s: float = 0.0,
        rank_batches_in_flight: int = 2,
        owns_client: bool = True,
    ) -> None:
        """`owns_client`: close the client with the store (not one several stores share)."""
        self._client = client
        self._owns_client = owns_client
        self._quantized = quantization != "none"
        self._dense_params = qm.SearchParams(
            hnsw_ef=search_ef,
            quantization=(
                qm.QuantizationSearchParams(rescore=True, oversampling=oversampling)
                if self._quantized
                else None
            ),
        )
        self._exact_params = qm.SearchParams(
            exact=True, quantization=qm.QuantizationSearchParams(ignore=True)
        )
        self._collection = collection
        self._dimensions = dimensions
        self._rankings: Coalescer[qm.QueryRequest, qm.QueryResponse] = Coalescer(
            self._query_batch,
            max_batch=rank_batch_max,
            max_wait_s=rank_batch_wait_s,
            in_flight=rank_batches_in_flight,
            isolate=(PermanentError,),
        )

    async def ensure_collection(self) -> None:
        """Creates the collection (cosine dense + IDF sparse) and its payload indexes, or
        brings an existing one's storage settings (quantisation, what is on disk) to these."""
        async with _qdrant_errors():
            if await self._client.collection_exists(self._collection):
                await self._update_collection()
            else:
                await self._client.create_collection(
                    self._collection,
                    vectors_config={
                        DENSE_VECTOR: qm.VectorParams(
                            size=self._dimensions,
                            distance=qm.Distance.COSINE,
                            # The originals are read only to rescore a query's candidates.
                            on_disk=self._quantized,
                            quantization_config=_INT8 if self._quantized else None,
                        )
                    },
                    sparse_vectors_config={
                        SPARSE_VECTOR: qm.SparseVectorParams(modifier=qm.Modifier.IDF)
                    },
                    on_disk_payload=True,
                )
            for name, kind in PAYLOAD_INDEXES:
                await self._client.create_payload_index(self._collection, name, _QDRANT_INDEX[kind])

    async def _update_collection(self) -> None:
        info = await self._client.get_collection(self._collection)
        vectors = info.config.params.vectors
        dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        size = dense.size if dense is not None else None
        if dense is None or size != self._dimensions:
            raise PermanentError(
                f"collection {self._collection!r} holds {size}-dimensional vectors; "
                f"the embedding model makes {self._dimensions}"
            )
        quantized = dense.quantization_config is not None
        if quantized != self._quantized or bool(dense.on_disk) != self._quantized:
            await self._client.update_collection(
                self._collection,
                vectors_config={
                    DENSE_VECTOR: qm.VectorParamsDiff(
                        on_disk=self._quantized,
                        quantization_config=_INT8 if self._quantized else qm.Disabled.DISABLED,
                    )
                },
            )
        if info.config.params.on_disk_payload is False:
            await self._client.update_collection(
                self._collection, collection_params=qm.CollectionParamsDiff(on_disk_payload=True)
            )

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Writes points; an existing id is overwritten."""
        if not points:
            return
        structs = []
        for point in points:
            vector: dict[str, list[float] | qm.SparseVector] = {DENSE_VECTOR: point.dense.tolist()}
            if point.sparse is not None and point.sparse.indices:
                vector[SPARSE_VECTOR] = qm.SparseVector(
                    indices=point.sparse.indices, values=point.sparse.values
                )
            structs.append(
                qm.PointStruct(id=point.point_id, vector=vector, payload=point.payload.to_store())
            )
        async with _qdrant_errors():
            await self._client.upsert(self._collection, structs, wait=True)

    async def publish_document(self, document: PublishedDocument) -> None:
        """Shows the document, hides older versions and drops its own stale tail, in one
        request.

        The server applies the three operations in order; a search landing between the first
        two can see both versions, which the search service's version guard hides.
        """
        shown, older, tail = (qdrant_filter(selector) for selector in document.selections())
        async with _qdrant_errors():
            await self._client.batch_update_points(
                self._collection,
                [
                    qm.SetPayloadOperation(
                        set_payload=qm.SetPayload(payload=document.shown_payload(), filter=shown)
                    ),
                    qm.SetPayloadOperation(
                        set_payload=qm.SetPayload(payload=HIDDEN_PAYLOAD, filter=older)
                    ),
                    qm.DeleteOperation(delete=qm.FilterSelector(filter=tail)),
                ],
                wait=True,
            )

    async def withdraw_document(self, document: WithdrawnDocument) -> None:
        """Deletes the failed run's chunks, then shows the live version again, in one request
        (a search landing between the two sees neither, never the failed run)."""
        own, live = document.selections()
        operations: list[Any] = [
            qm.DeleteOperation(delete=qm.FilterSelector(filter=qdrant_filter(own)))
        ]
        if live is not None:
            operations.append(
                qm.SetPayloadOperation(
                    set_payload=qm.SetPayload(payload={"active": True}, filter=qdrant_filter(live))
                )
            )
        async with _qdrant_errors():
            await self._client.batch_update_points(self._collection, operations, wait=True)

    async def delete(self, selector: Filter) -> None:
        """Deletes the points the filter selects."""
        async with _qdrant_errors():
            await self._client.delete(
                self._collection, qm.FilterSelector(filter=qdrant_filter(selector)), wait=True
            )

    async def set_readers(self, selector: Filter, readers: Sequence[str]) -> None:
        """Sets who may read the points the filter selects (no vector is touched)."""
        async with _qdrant_errors():
            await self._client.set_payload(
                self._collection,
                payload={"readers": list(readers)},
                points=qdrant_filter(selector),
                wait=True,
            )

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        """Deletes points by id."""
        if not point_ids:
            return
        async with _qdrant_errors():
            await self._client.delete(
                self._collection, qm.PointIdsList(points=list(point_ids)), wait=True
            )

    async def document_chunks(
        self, tenant_id: str, document_id: str, limit: int = 10_000
    ) -> list[ChunkPayload]:
        """The stored payloads of a document's chunks (active or not), by chunk index."""
        selector = qdrant_filter(chunks_of_document(tenant_id, document_id))
        payloads: list[ChunkPayload] = []
        offset: Any = None
        async with _qdrant_errors():
            while len(payloads) < limit:
                records, offset = await self._client.scroll(
                    self._collection,
                    scroll_filter=selector,
                    limit=min(256, limit - len(payloads)),
                    offset=offset,
                    with_payload=True,
                )
                payloads.extend(ChunkPayload.from_store(record.payload) for record in records)
                if offset is None:
                    break
        return sorted(payloads, key=lambda payload: payload.chunk_index)

    async def search(self, query: VectorQuery) -> list[ScoredChunk]:
        """The best active chunks in scope, by cosine (dense) or BM25 (sparse)."""
        if not query.scope.kb_ids:
            return []
        if query.mode is RetrievalMode.SPARSE:
            sparse = _sparse_vector(query.sparse)
            if sparse is None:
                return []
            async with _qdrant_errors():
                response = await self._client.query_points(
                    self._collection,
                    query=sparse,
                    using=SPARSE_VECTOR,
                    query_filter=qdrant_filter(query.scope.filter()),
                    search_params=_within(query.scope),
                    limit=query.limit,
                    with_payload=True,
                )
        else:
            async with _qdrant_errors():
                response = await self._client.query_points(
                    self._collection,
                    query=query.dense.tolist(),
                    using=DENSE_VECTOR,
                    query_filter=qdrant_filter(query.scope.filter()),
                    search_params=self._exact_params if query.exact else self._dense_params,
                    limit=query.limit,
                    score_threshold=query.score_threshold,
                    with_payload=True,
                )
        return [ScoredChunk.from_point(p) for p in response.points]

    async def rank(self, query: RankQuery) -> Rankings:
        """The query's rankings in one batch request, shared with the searches ranking at the
        same moment."""
        parts = query.parts()
        if not parts:
            return Rankings([], [])
        selector = qdrant_filter(query.scope.filter())
        requests = []
        for part, term in parts:
            if part is RankPart.DENSE:
                request = qm.QueryRequest(
                    query=query.dense.tolist(),
                    using=DENSE_VECTOR,
                    filter=selector,
                    params=self._dense_params,
                    limit=query.depth,
                    score_threshold=query.threshold,
                )
            elif part is RankPart.SPARSE:
                request = qm.QueryRequest(
                    query=_sparse_vector(query.sparse),
                    using=SPARSE_VECTOR,
                    filter=selector,
                    params=_within(query.scope),
                    limit=query.depth,
                )
            else:
                request = qm.QueryRequest(
                    query=qm.SparseVector(indices=[term or 0], values=[1.0]),
                    using=SPARSE_VECTOR,
                    filter=selector,
                    limit=query.probe_limit,
                    with_payload=[DOCUMENT_ID],
                )
            requests.append(request)
        answers = await self._rankings.submit(requests)
        return Rankings.from_answers(query, [answer.points for answer in answers])

    async def _query_batch(self, requests: list[qm.QueryRequest]) -> list[qm.QueryResponse]:
        async with _qdrant_errors():
            return await self._client.query_batch_points(self._collection, requests)

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        """The points still in scope, with payloads, and for those in `dense` their dense
        vectors (retrieved by id and checked here: cheaper than a filtered query over the ids)."""
        if not point_ids or not scope.kb_ids:
            return {}
        vectors = [point for point in point_ids if point in dense]
        async with _qdrant_errors():
            records = await self._client.retrieve(
                self._collection, list(point_ids), with_payload=True, with_vectors=False
            )
            with_dense = (
                await self._client.retrieve(
                    self._collection, vectors, with_payload=False, with_vectors=[DENSE_VECTOR]
                )
                if vectors
                else []
            )
        return readable(records, scope, with_dense)

    async def get_points(self, point_ids: Sequence[str]) -> list[ChunkPoint]:
        """Those of the points that exist, with vectors and payloads."""
        if not point_ids:
            return []
        async with _qdrant_errors():
            records = await self._client.retrieve(
                self._collection, list(point_ids), with_payload=True, with_vectors=True
            )
        return [ChunkPoint.from_record(record) for record in records]

    async def export_points(
        self, selector: Filter | None, batch: int = 256
    ) -> AsyncIterator[list[ChunkPoint]]:
        """Every point the filter selects (all, without one), with its vectors and payload, in
        batches."""
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
        async with _qdrant_errors():
            records, following = await self._client.scroll(
                self._collection,
                scroll_filter=qdrant_filter(selector) if selector is not None else None,
                limit=batch,
                offset=offset,
                with_payload=True,
                with_vectors=True,
            )
        points = [ChunkPoint.from_record(record) for record in records]
        return points, None if following is None else str(following)

    async def count(self, selector: Filter) -> int:
        """How many points the filter selects (exact)."""
        async with _qdrant_errors():
            result = await self._client.count(
                self._collection, count_filter=qdrant_filter(selector), exact=True
            )
        return result.count

    async def drop(self) -> None:
        """Deletes the collection, then closes."""
        async with _qdrant_errors():
            await self._client.delete_collection(self._collection)
        log.info("dropped the collection %s", self._collection)
        await self.close()

    async def close(self) -> None:
        """Answers the rankings under way and closes the client (if it is the store's)."""
        await self._rankings.close()
        if self._owns_client:
            await self._client.close()


def qdrant_filter(selector: Filter) -> qm.Filter:
    """The server's filter for a store-neutral one: the only translation in this module."""
    return qm.Filter(
        must=[_qdrant_condition(c) for c in selector.must] or None,
        should=[_qdrant_condition(c) for c in selector.should] or None,
        must_not=[_qdrant_condition(c) for c in selector.must_not] or None,
    )


def _qdrant_condition(condition: Condition) -> qm.Condition:
    match condition:
        case Match(key, value):
            return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))
        case MatchAny(key, values):
            return qm.FieldCondition(key=key, match=qm.MatchAny(any=list(values)))
        case Range(key, gte, lt):
            return qm.FieldCondition(key=key, range=qm.Range(gte=gte, lt=lt))
        case Filter():
            return qdrant_filter(condition)


def _within(scope: SearchScope) -> qm.SearchParams:
    """A sparse query's parameters: its terms' IDF counted over its tenant's chunks
    (`SearchScope.term_corpus`), not over the whole collection."""
    return qm.SearchParams(idf=qm.IdfCorpusParams(corpus=qdrant_filter(scope.term_corpus())))


def _sparse_vector(sparse: SparseVector | None) -> qm.SparseVector | None:
    if sparse is None or not sparse.indices:
        return None
    return qm.SparseVector(indices=sparse.indices, values=sparse.values)

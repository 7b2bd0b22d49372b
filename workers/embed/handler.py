"""Embed stage: a batch of chunks in, the same batch with dense and sparse vectors out.

What is embedded is each chunk's `embedding_text`: its context prefix, then its text. Vectors
come from the embedding cache when the same string was embedded by the same model before; only
the rest goes through the model, and is then cached. The batches a worker has in flight at the
same moment (a read of up to `stages.embed.concurrency` messages) share one read of the cache,
one model call and one write of the cache (`core.coalescing`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from core.coalescing import Coalescer
from core.errors import PermanentError
from core.sparse import SparseEncoder
from infra.embedding.base import Embedder
from infra.process.metrics import CHUNKS_EMBEDDED, EMBEDDING_CACHE
from schemas.domain import Document
from schemas.events import ChunkBatchEmbedded, ChunkBatchReady, ModelVectors
from schemas.index_generations import ModelIdentity
from workers.ports import DocumentStatus, StageResult


class VectorCache(Protocol):
    """Earlier vectors by model and text (`infra.mongo.embedding_cache.EmbeddingCache`)."""

    async def get_many(self, model_id: str, texts: Sequence[str]) -> dict[int, NDArray[np.float32]]:
        """Cached vectors by position."""
        ...

    async def put_many(
        self, model_id: str, texts: Sequence[str], vectors: NDArray[np.float32]
    ) -> None:
        """Stores vectors."""
        ...


class Models(Protocol):
    """The models new chunks are embedded with: the live generation's, then one being built
    (`services.generations.models.FilledModels`)."""

    async def filled(self) -> Sequence[tuple[ModelIdentity, Embedder]]:
        """Each model with its embedder, the live generation's first."""
        ...


class EmbedHandler:
    """Embeds one batch of chunks with every model the vector store is filled with."""

    def __init__(
        self,
        documents: DocumentStatus,
        models: Models,
        cache: VectorCache,
        sparse: SparseEncoder,
    ) -> None:
        self._documents = documents
        self._models = models
        self._cache = cache
        self._sparse = sparse
        self._texts: dict[ModelIdentity, Coalescer[str, NDArray[np.float32]]] = {}

    async def __call__(self, event: ChunkBatchReady, _: Document | None) -> StageResult:
        """Handles one `ChunkBatchReady` of a document now `embedding`."""
        texts = [chunk.embedding_text for chunk in event.chunks]
        models = await self._models.filled()
        for gone in set(self._texts) - {identity for identity, _ in models}:
            del self._texts[gone]  # a generation no longer filled: its model is let go
        embedded = [(identity, await self._embed(identity, e, texts)) for identity, e in models]
        (identity, vectors), more = embedded[0], embedded[1:]
        sparse = [self._sparse.document(text) for text in texts]
        await self._documents.record_batch_embedded(
            event.document_id, event.generation, event.batch_index, len(texts)
        )
        return StageResult(
            publish=[
                ChunkBatchEmbedded(
                    **event.model_dump(exclude={"event_id", "occurred_at"}),
                    model=models[0][1].model_id,
                    dimensions=identity.dimensions,
                    dense_b64=ChunkBatchEmbedded.encode_vectors(vectors),
                    identity=identity,
                    more_vectors=[
                        ModelVectors(
                            identity=other, dense_b64=ChunkBatchEmbedded.encode_vectors(matrix)
                        )
                        for other, matrix in more
                    ],
                    **ChunkBatchEmbedded.encode_sparse([(s.indices, s.values) for s in sparse]),
                )
            ],
            finished_document=event.last,
        )

    async def _embed(
        self, identity: ModelIdentity, embedder: Embedder, texts: list[str]
    ) -> NDArray[np.float32]:
        """The texts' (n, d) matrix from one model; the batches in flight share its calls."""
        if not texts:
            return np.zeros((0, embedder.dimensions), dtype=np.float32)
        coalescer = self._texts.get(identity)
        if coalescer is None:

            async def vectors(batch: list[str]) -> list[NDArray[np.float32]]:
                return await self._vectors(embedder, batch)

            coalescer = self._texts[identity] = Coalescer(
                vectors, max_batch=16, isolate=(PermanentError,)
            )
        return np.stack(await coalescer.submit(texts))

    async def _vectors(self, embedder: Embedder, texts: list[str]) -> list[NDArray[np.float32]]:
        """Each text's vector: cached, or embedded now (and cached)."""
        model = embedder.model_id
        cached = await self._cache.get_many(model, texts)
        missing = [i for i in range(len(texts)) if i not in cached]
        EMBEDDING_CACHE.labels("hit").inc(len(cached))
        EMBEDDING_CACHE.labels("miss").inc(len(missing))
        vectors = np.zeros((len(texts), embedder.dimensions), dtype=np.float32)
        for i, vector in cached.items():
            vectors[i] = vector
        if missing:
            fresh = await asyncio.to_thread(embedder.embed_documents, [texts[i] for i in missing])
            CHUNKS_EMBEDDED.inc(len(missing))
            vectors[missing] = fresh
            await self._cache.put_many(model, [texts[i] for i in missing], fresh)
        return list(vectors)

"""Opens the configured vector store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.settings import Settings
from infra.vectorstore.base import VectorStore

if TYPE_CHECKING:
    from infra.vectorstore.edge import EdgeVectorStore


async def open_vector_store(settings: Settings) -> VectorStore:
    """A Qdrant server store when a URL is set, the store process's when its socket is set,
    else the embedded engine in this process; collection ensured."""
    store: VectorStore
    if settings.qdrant.url is None:
        if settings.qdrant.store_socket is not None:
            from infra.vectorstore.remote import RemoteVectorStore

            store = RemoteVectorStore(settings.qdrant.store_socket)
        else:
            store = embedded_store(settings)
    else:
        from qdrant_client import AsyncQdrantClient

        from infra.vectorstore.qdrant_server import QdrantServerStore

        api_key = settings.qdrant.api_key.get_secret_value() if settings.qdrant.api_key else None
        client = AsyncQdrantClient(
            url=settings.qdrant.url, api_key=api_key, timeout=int(settings.qdrant.timeout_s)
        )
        store = QdrantServerStore(
            client,
            settings.qdrant.collection,
            settings.embedding.dimensions,
            search_ef=settings.qdrant.search_ef,
            quantization=settings.qdrant.quantization,
            oversampling=settings.qdrant.oversampling,
            rank_batch_max=settings.qdrant.rank_batch_max,
            rank_batch_wait_s=settings.qdrant.rank_batch_wait_ms / 1000,
            rank_batches_in_flight=settings.qdrant.rank_batches_in_flight,
        )
    await store.ensure_collection()
    return store


def embedded_store(settings: Settings) -> EdgeVectorStore:
    """The embedded engine at the settings' path (not opened yet)."""
    from infra.vectorstore.edge import EdgeVectorStore

    return EdgeVectorStore(
        settings.vector_store_path,
        settings.embedding.dimensions,
        optimize_idle_s=settings.qdrant.optimize_idle_s,
        optimize_every_s=settings.qdrant.optimize_every_s,
        search_ef=settings.qdrant.search_ef,
        quantization=settings.qdrant.quantization,
        oversampling=settings.qdrant.oversampling,
        rank_batch_max=settings.qdrant.rank_batch_max,
        rank_batch_wait_s=settings.qdrant.rank_batch_wait_ms / 1000,
        in_ram_max_points=settings.qdrant.in_ram_max_points,
        threads=settings.qdrant.store_threads,
    )

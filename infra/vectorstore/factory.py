"""Opens the configured vector store, or one generation's (`schemas.index_generations`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from infra.settings import Settings
from infra.vectorstore.base import VectorStore
from schemas.index_generations import IndexGeneration

if TYPE_CHECKING:
    from infra.vectorstore.edge import EdgeVectorStore

# A store's name: a directory's or a collection's, nothing that leaves the parent directory.
STORE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def base_store_name(settings: Settings) -> str:
    """The name of the store the deployment always had (the first generation's): the Qdrant
    server's collection, or the embedded engine's directory."""
    if settings.qdrant.url is not None:
        return settings.qdrant.collection
    return settings.vector_store_path.name


async def open_generation_store(settings: Settings, generation: IndexGeneration) -> VectorStore:
    """The store of one generation (its own name and vector size); collection ensured."""
    return await open_vector_store(
        settings, generation.store_name(base_store_name(settings)), generation.model.dimensions
    )


async def open_vector_store(
    settings: Settings, name: str | None = None, dimensions: int | None = None
) -> VectorStore:
    """A Qdrant server store when a URL is set, the store process's when its socket is set,
    else the embedded engine in this process; collection ensured. `name` and `dimensions`
    are a generation's (None: the configured store and model)."""
    name = name or base_store_name(settings)
    dimensions = dimensions or settings.embedding.dimensions
    store: VectorStore
    if settings.qdrant.url is None:
        if settings.qdrant.store_socket is not None:
            from infra.vectorstore.remote import RemoteVectorStore

            store = RemoteVectorStore(settings.qdrant.store_socket, name, dimensions)
        else:
            store = embedded_store(settings, store_path(settings, name), dimensions)
    else:
        from qdrant_client import AsyncQdrantClient

        from infra.vectorstore.qdrant_server import QdrantServerStore

        api_key = settings.qdrant.api_key.get_secret_value() if settings.qdrant.api_key else None
        client = AsyncQdrantClient(
            url=settings.qdrant.url, api_key=api_key, timeout=int(settings.qdrant.timeout_s)
        )
        store = QdrantServerStore(
            client,
            name,
            dimensions,
            search_ef=settings.qdrant.search_ef,
            quantization=settings.qdrant.quantization,
            oversampling=settings.qdrant.oversampling,
            rank_batch_max=settings.qdrant.rank_batch_max,
            rank_batch_wait_s=settings.qdrant.rank_batch_wait_ms / 1000,
            rank_batches_in_flight=settings.qdrant.rank_batches_in_flight,
        )
    await store.ensure_collection()
    return store


def store_path(settings: Settings, name: str) -> Path:
    """Where the embedded engine keeps the store called `name`: beside the configured one."""
    if not STORE_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a store's name")
    return settings.vector_store_path.parent / name


def embedded_store(
    settings: Settings, path: Path | None = None, dimensions: int | None = None
) -> EdgeVectorStore:
    """The embedded engine at `path` (the settings' without one), for vectors of
    `dimensions` (the configured model's without), not opened yet."""
    from infra.vectorstore.edge import EdgeVectorStore

    return EdgeVectorStore(
        path or settings.vector_store_path,
        dimensions or settings.embedding.dimensions,
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

"""Index worker: wiring only (the logic is in handler.py).

Runs as its own process only with a Qdrant server. With the embedded engine the API process
owns the vector store and runs this stage itself (see `api.app`).
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream import FastStream

from core.errors import PermanentError
from infra.settings import Settings
from infra.vectorstore.factory import open_vector_store
from schemas.events import ChunkBatchEmbedded
from workers.index.handler import IndexHandler
from workers.wiring import PipelineResources, stage_app


def create_app(settings: Settings) -> FastStream:
    """The index worker process (Qdrant server deployments)."""
    if settings.embedded_vector_store:
        raise PermanentError(
            "the index worker needs RAGLINE_QDRANT__URL; with the embedded vector store the "
            "API process runs the index stage"
        )

    async def make_handler(resources: PipelineResources, stack: AsyncExitStack) -> IndexHandler:
        store = await open_vector_store(settings)
        stack.push_async_callback(store.close)
        return IndexHandler(resources.documents, resources.lifecycle, store, resources.blobs)

    return stage_app(settings, "index", ChunkBatchEmbedded, make_handler)

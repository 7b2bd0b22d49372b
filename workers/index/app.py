"""Index worker: wiring only (the logic is in handler.py).

Runs as its own process only with a Qdrant server. With the embedded engine the API process
owns the vector store and runs this stage itself (see `ragline.api`).
"""

from __future__ import annotations

from faststream import FastStream

from core.errors import PermanentError
from infra.settings import Settings
from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchEmbedded
from workers.index.handler import IndexHandler
from workers.runtime import Stage, document_stage
from workers.wiring import stage_app


async def build_stage(system: System) -> Stage[ChunkBatchEmbedded]:
    """The index stage over the process's objects (the vector store is opened here)."""
    handler = IndexHandler(
        system.documents,
        system.lifecycle,
        await system.open_vector_store(),
        system.blobs,
        system.freshness,
    )
    return document_stage(
        "index",
        ChunkBatchEmbedded,
        ParseStatus.INDEXING,
        handler,
        system.documents,
        system.settings.stages.index,
        slow_means_outage=True,
    )


def create_app(settings: Settings) -> FastStream:
    """The index worker process (Qdrant server deployments)."""
    if settings.embedded_vector_store:
        raise PermanentError(
            "the index worker needs RAGLINE_QDRANT__URL; with the embedded vector store the "
            "API process runs the index stage"
        )
    return stage_app(settings, "index", build_stage)

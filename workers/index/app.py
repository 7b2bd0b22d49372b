"""Index stage: wiring only (the logic is in handler.py).

With a Qdrant server it runs as a worker of its own (`python -m workers index`); with the
embedded engine the API process owns the vector store and hosts this stage itself
(`ragline.api`).
"""

from __future__ import annotations

from core.errors import PermanentError
from core.periodic import Periodic
from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchEmbedded
from workers.hosting import StageProcess
from workers.index.handler import IndexHandler
from workers.runtime import Stage, document_stage

# How often the index stage's process looks for a generation to build or a store to drop.
MIGRATION_POLL_S = 2.0


async def build_stage(system: System) -> Stage[ChunkBatchEmbedded]:
    """The index stage over the process's objects (the vector store is opened here). The
    process that writes the vector store also builds a generation for another embedding model
    when an admin starts one (`services.generations.migration`)."""
    handler = IndexHandler(
        system.document_repo,
        system.lifecycle,
        await system.open_vector_store(),
        system.blobs,
        system.freshness_service,
        system.encoders,
    )
    migrations = Periodic(
        "building vector store generations", MIGRATION_POLL_S, system.migrator.work
    )
    migrations.start()
    system.on_close(migrations.stop)
    return document_stage(
        "index",
        ChunkBatchEmbedded,
        ParseStatus.INDEXING,
        handler,
        system.document_repo,
        system.settings.stages.index,
        slow_means_outage=True,
        on_failure=handler.withdraw,
    )


async def build_worker_stage(system: System) -> Stage[ChunkBatchEmbedded]:
    """The index stage in a worker of its own, which only a Qdrant server allows (the
    embedded engine is opened by one process, the API)."""
    if system.settings.embedded_vector_store:
        raise PermanentError(
            "the index worker needs RAGLINE_QDRANT__URL; with the embedded vector store the "
            "API process runs the index stage"
        )
    return await build_stage(system)


# Hosted by the API process with the embedded engine.
INDEX_IN_API = StageProcess("index", build_stage)
INDEX = StageProcess("index", build_worker_stage)

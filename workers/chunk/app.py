"""Chunk worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import DocumentExtracted
from workers.chunk.context import Contextualizer
from workers.chunk.handler import ChunkHandler
from workers.hosting import StageProcess
from workers.runtime import Stage, carried_stage


async def build_stage(system: System) -> Stage[DocumentExtracted]:
    """The chunk stage over the process's objects."""
    settings = system.settings
    handler = ChunkHandler(
        system.document_repo,
        system.blobs,
        settings.chunking,
        batch_size=settings.embedding.batch_size,
        contexts=Contextualizer(settings.contextual, system.context_provider, system.context_cache),
    )
    return carried_stage(
        "chunk",
        DocumentExtracted,
        ParseStatus.CHUNKING,
        handler,
        system.document_repo,
        settings.stages.chunk,
    )


CHUNK = StageProcess("chunk", build_stage)

"""Chunk worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream import FastStream

from infra.settings import Settings
from schemas.events import DocumentExtracted
from workers.chunk.handler import ChunkHandler
from workers.wiring import PipelineResources, stage_app


def create_app(settings: Settings) -> FastStream:
    """The chunk worker process."""

    async def make_handler(resources: PipelineResources, _: AsyncExitStack) -> ChunkHandler:
        return ChunkHandler(
            resources.documents,
            resources.blobs,
            settings.chunking,
            batch_size=settings.embedding.batch_size,
        )

    return stage_app(settings, "chunk", DocumentExtracted, make_handler)

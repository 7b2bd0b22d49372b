"""Chunk worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream import FastStream

from infra.context.cache import ContextCache
from infra.context.factory import build_context_provider
from infra.settings import Settings
from schemas.events import DocumentExtracted
from workers.chunk.context import Contextualizer
from workers.chunk.handler import ChunkHandler
from workers.wiring import PipelineResources, stage_app


def create_app(settings: Settings) -> FastStream:
    """The chunk worker process."""

    async def make_handler(resources: PipelineResources, stack: AsyncExitStack) -> ChunkHandler:
        provider = build_context_provider(settings.contextual)
        if provider is not None:
            stack.push_async_callback(provider.close)
        return ChunkHandler(
            resources.documents,
            resources.blobs,
            settings.chunking,
            batch_size=settings.embedding.batch_size,
            contexts=Contextualizer(settings.contextual, provider, ContextCache(resources.db)),
        )

    return stage_app(settings, "chunk", DocumentExtracted, make_handler)

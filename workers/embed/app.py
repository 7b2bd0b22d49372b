"""Embed worker: wiring only (the logic is in handler.py). Loads the model once, at start."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from faststream import FastStream

from infra.embedding.factory import build_embedder
from infra.embedding_cache import EmbeddingCache
from infra.settings import Settings
from infra.sparse import SparseEncoder
from schemas.events import ChunkBatchReady
from workers.embed.handler import EmbedHandler
from workers.wiring import PipelineResources, stage_app


def create_app(settings: Settings) -> FastStream:
    """The embed worker process."""

    async def make_handler(resources: PipelineResources, _: AsyncExitStack) -> EmbedHandler:
        embedder = await asyncio.to_thread(build_embedder, settings.embedding)
        return EmbedHandler(
            resources.documents, embedder, EmbeddingCache(resources.db), SparseEncoder()
        )

    return stage_app(
        settings, "embed", ChunkBatchReady, make_handler, settings.embedding.concurrency
    )

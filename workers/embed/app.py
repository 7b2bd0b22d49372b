"""Embed worker: wiring only (the logic is in handler.py). Loads the live generation's model at
start (a building generation's when it begins)."""

from __future__ import annotations

import asyncio

from core.sparse import SparseEncoder
from infra.embedding.local import LocalEmbedder
from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import ChunkBatchReady
from workers.embed.handler import EmbedHandler
from workers.hosting import StageProcess
from workers.runtime import Stage, carried_stage


async def build_stage(system: System) -> Stage[ChunkBatchReady]:
    """The embed stage over the process's objects (the model is loaded here)."""
    embedder = await system.open_embedder()
    if isinstance(embedder, LocalEmbedder):
        # Its document model loads on the first batch: load it now, before messages wait.
        await asyncio.to_thread(embedder.load_document_model)
    handler = EmbedHandler(
        system.document_repo, system.filled_models, system.embedding_cache, SparseEncoder()
    )
    return carried_stage(
        "embed",
        ChunkBatchReady,
        ParseStatus.EMBEDDING,
        handler,
        system.document_repo,
        system.settings.stages.embed,
    )


EMBED = StageProcess("embed", build_stage)

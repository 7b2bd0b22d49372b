"""The embedding models a process holds, one per model and loaded on first use: the live
generation's, and while another is being built, its model too (`schemas.index_generations`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from core.errors import PermanentError
from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.settings.embedding import EmbeddingSettings
from schemas.index_generations import ModelIdentity

log = logging.getLogger(__name__)

# How long a model no longer needed is kept before it is let go (`Encoders.release`): longer
# than any search or batch takes.
RELEASE_AFTER_S = 60.0
# The nice value of a background embedder's threads (`Encoders.background`): the process's
# other threads get the CPU first when they need it.
BACKGROUND_NICE = 10


class Encoders:
    """Embedders by model, built from the settings with each model in place of the configured
    one (`EmbeddingSettings.for_model`)."""

    def __init__(
        self,
        settings: EmbeddingSettings,
        run_dir: Path,
        shared: Mapping[ModelIdentity, Embedder] | None = None,
    ) -> None:
        """`shared`: embedders loaded elsewhere (one model shared by several systems in one
        process), used as they are and never closed here."""
        self._settings = settings
        self._run_dir = run_dir
        self._shared = dict(shared or {})
        self._loaded: dict[ModelIdentity, Embedder] = dict(self._shared)
        self._loading: dict[ModelIdentity, asyncio.Lock] = {}
        # When each loaded model was first found no longer needed (`release`).
        self._unused_since: dict[ModelIdentity, float] = {}

    async def get(self, model: ModelIdentity) -> Embedder:
        """`model`'s embedder, loaded now if it was not (its vector size checked)."""
        embedder = self._loaded.get(model)
        if embedder is not None:
            return embedder
        async with self._loading.setdefault(model, asyncio.Lock()):
            if model not in self._loaded:
                self._loaded[model] = await asyncio.to_thread(self._build, model)
                log.info("loaded the embedding model %s", model.label)
            return self._loaded[model]

    def loaded(self, model: ModelIdentity) -> Embedder | None:
        """`model`'s embedder if it is loaded."""
        return self._loaded.get(model)

    def release(self, keep: Collection[ModelIdentity], idle_s: float = RELEASE_AFTER_S) -> None:
        """Lets go of the models not in `keep` (a migration ended) once they have been out of
        it for `idle_s`: a search or a batch that began with one finishes with it."""
        now = time.monotonic()
        for model in list(self._loaded):
            if model in keep or model in self._shared:
                self._unused_since.pop(model, None)
                continue
            if now - self._unused_since.setdefault(model, now) >= idle_s:
                del self._unused_since[model]
                self._loaded.pop(model).close()
                log.info("released the embedding model %s", model.label)

    def background(self, model: ModelIdentity, parallelism: int) -> Embedder:
        """A new embedder of `model` for work done in the background (a generation's build):
        documents on torch, in `parallelism` single-threaded model copies (0: one per CPU)
        whose threads run at a lower CPU priority than the process's own (`BACKGROUND_NICE`),
        so that searches in the same process come first. Not kept here: the caller closes
        it."""
        settings = self._settings.for_model(model).model_copy(
            update={
                "query_runtime": "torch",
                "document_nice": BACKGROUND_NICE,
                "parallelism": parallelism,
                "torch_threads": 1,
            }
        )
        return self._build(model, settings)

    def _build(self, model: ModelIdentity, settings: EmbeddingSettings | None = None) -> Embedder:
        embedder = build_embedder(settings or self._settings.for_model(model), self._run_dir)
        if embedder.dimensions != model.dimensions:
            raise PermanentError(
                f"the embedding model {model.label} makes {embedder.dimensions}-dimensional "
                f"vectors, not {model.dimensions}"
            )
        return embedder

"""Builds the configured embedder."""

from __future__ import annotations

import logging
from pathlib import Path

from infra.embedding.base import Embedder
from infra.settings import Settings
from infra.settings.embedding import EmbeddingSettings

log = logging.getLogger(__name__)


def build_embedder(settings: EmbeddingSettings, run_dir: Path | None = None) -> Embedder:
    """The embedder the settings ask for, loaded and ready. `run_dir` is the process's data
    directory, under which the local model's ONNX export is cached unless `onnx_dir` is set."""
    if settings.provider == "gemini":
        from infra.embedding.gemini import GeminiEmbedder

        return GeminiEmbedder(settings)
    if settings.provider == "hashed":
        from infra.embedding.hashed import HashedEmbedder

        log.warning("embedding with hashed word features: for tests and demos, not production")
        return HashedEmbedder(settings)
    from infra.embedding.local import LocalEmbedder, SentenceTransformerEmbedder
    from infra.embedding.onnx_runtime import OnnxUnavailable

    if settings.query_runtime == "onnx":
        onnx_dir = settings.onnx_path(run_dir or Settings.model_fields["run_dir"].default)
        try:
            return LocalEmbedder(settings, onnx_dir)
        except OnnxUnavailable as exc:
            # Searches still work on torch, only slower.
            log.warning("search queries are embedded with torch: %s", exc)
    return SentenceTransformerEmbedder(settings)

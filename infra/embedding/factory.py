"""Builds the configured embedder."""

from __future__ import annotations

from infra.embedding.base import Embedder
from infra.settings import EmbeddingSettings


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """The embedder the settings ask for, loaded and ready."""
    if settings.provider == "gemini":
        from infra.embedding.gemini import GeminiEmbedder

        return GeminiEmbedder(settings)
    from infra.embedding.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(settings)

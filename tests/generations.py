"""A vector store as the deployment's only generation (`schemas.index_generations`), recorded
in a test's MongoDB database: what the index stage and the search service write and read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.mongo.client import Database
from infra.mongo.generation_repository import GenerationRepository
from infra.settings.embedding import EmbeddingSettings
from infra.vectorstore.base import VectorStore
from infra.vectorstore.generational import GenerationalStore
from schemas.index_generations import IndexGeneration, ModelIdentity, Provider
from services.generations.watch import GenerationWatch


def hashed_model(dimensions: int) -> ModelIdentity:
    """The hashed embedder at `dimensions`: the model of a test's vectors."""
    return ModelIdentity(provider="hashed", dimensions=dimensions)


def only_generation(
    db: Database, store: VectorStore, dimensions: int, provider: Provider = "hashed"
) -> GenerationalStore:
    """`store` as generation 1, of the provider's model (the hashed embedder's, or the
    packaged local model's), recorded at the first use."""
    model = ModelIdentity(provider=provider, dimensions=dimensions)
    watch = GenerationWatch(GenerationRepository(db.client, db), model, refresh_s=0.05, valid_s=1.0)

    async def open_store(generation: IndexGeneration) -> VectorStore:
        assert generation.number == 1, generation
        return store

    return GenerationalStore(watch, open_store)


def hashed_encoders(dimensions: int, run_dir: Path) -> Encoders:
    """Encoders configured with the hashed embedder at `dimensions`."""
    return Encoders(EmbeddingSettings(provider="hashed", dimensions=dimensions), run_dir)


class OneModel:
    """The embed stage's models when the vector store has one generation: `embedder`'s (a
    test's own embedder, as the stage embeds with it)."""

    def __init__(self, embedder: Embedder, provider: Provider = "hashed") -> None:
        self._model = ModelIdentity(provider=provider, dimensions=embedder.dimensions)
        self._embedder = embedder

    async def filled(self) -> Sequence[tuple[ModelIdentity, Embedder]]:
        return [(self._model, self._embedder)]

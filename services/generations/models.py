"""The embedding models new chunks are embedded with: every generation being filled's
(`schemas.index_generations`), loaded as a generation begins to be built and let go once it
is not filled any more."""

from __future__ import annotations

from collections.abc import Sequence

from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.vectorstore.generational import GenerationSource
from schemas.index_generations import ModelIdentity


class FilledModels:
    """The live generation's model, then a building one's."""

    def __init__(self, generations: GenerationSource, encoders: Encoders) -> None:
        self._generations = generations
        self._encoders = encoders

    async def filled(self) -> Sequence[tuple[ModelIdentity, Embedder]]:
        """Each model with its embedder (loaded now if it was not), the live one's first."""
        models = (await self._generations.current()).models
        self._encoders.release(models)
        return [(model, await self._encoders.get(model)) for model in models]

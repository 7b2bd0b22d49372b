"""One `Retriever` per generation of the vector store (`schemas.index_generations`): a search
takes the live generation's at its start and keeps it to the end, so its query is embedded by
the model that made the vectors it is ranked against, whatever switches meanwhile.

While a generation is being built its model is loaded here in the background, so that the
switch finds it ready and no search waits for a model to load; once a generation is no longer
live or building, its model is let go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.vectorstore.base import VectorStore
from infra.vectorstore.generational import GenerationalStore
from schemas.index_generations import Generations
from services.search.retrieval import Retriever

log = logging.getLogger(__name__)

MakeRetriever = Callable[[Embedder, VectorStore], Retriever]


class Retrievers:
    """The live generation's retriever, and its model's successor loaded ahead."""

    def __init__(self, store: GenerationalStore, encoders: Encoders, make: MakeRetriever) -> None:
        self._store = store
        self._encoders = encoders
        self._make = make
        self._by_generation: dict[int, Retriever] = {}
        self._preloading: asyncio.Task[None] | None = None

    async def live(self) -> tuple[int, Retriever]:
        """The live generation's number and retriever."""
        view = await self._store.latest_generations()
        live = view.live
        retriever = self._by_generation.get(live.number)
        if retriever is None:
            retriever = self._make(
                await self._encoders.get(live.model), await self._store.store_of(live)
            )
            self._by_generation = {live.number: retriever}
        # A model no longer live nor building is let go a while after (searches that began
        # with it finish with it).
        self._encoders.release({g.model for g in view.filled})
        self._preload(view)
        return live.number, retriever

    def _preload(self, view: Generations) -> None:
        building = view.building
        if building is None or self._encoders.loaded(building.model) is not None:
            return
        if self._preloading is not None and not self._preloading.done():
            return

        async def load() -> None:
            try:
                await self._encoders.get(building.model)
            except Exception as exc:  # said, and tried again by the next search
                log.warning("cannot load %s ahead of its switch: %s", building.model.label, exc)

        self._preloading = asyncio.create_task(load())

    async def close(self) -> None:
        """Stops a model loading ahead."""
        if self._preloading is not None:
            self._preloading.cancel()

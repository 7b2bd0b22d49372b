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
import time
from collections.abc import Callable

from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.vectorstore.base import VectorStore
from infra.vectorstore.generational import GenerationalStore
from schemas.index_generations import Generations
from services.search.retrieval import Retriever

log = logging.getLogger(__name__)

MakeRetriever = Callable[[Embedder, VectorStore], Retriever]
# How often searches look again at which models to let go or load ahead, when the generations
# they see have not changed.
TIDY_EVERY_S = 1.0


class Retrievers:
    """The live generation's retriever, and its model's successor loaded ahead."""

    def __init__(self, store: GenerationalStore, encoders: Encoders, make: MakeRetriever) -> None:
        self._store = store
        self._encoders = encoders
        self._make = make
        self._by_generation: dict[int, Retriever] = {}
        self._preloading: asyncio.Task[None] | None = None
        # The generations the models were last tidied for, and when (monotonic).
        self._tidied: tuple[Generations | None, float] = (None, 0.0)

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
        self._tidy(view)
        return live.number, retriever

    def _tidy(self, view: Generations) -> None:
        """Lets go of the models no longer live nor building a while after (searches that
        began with one finish with it) and loads a building generation's model ahead: when the
        generations change, and at most every `TIDY_EVERY_S` otherwise."""
        seen, at = self._tidied
        now = time.monotonic()
        if view is seen and now - at < TIDY_EVERY_S:
            return
        self._tidied = (view, now)
        self._encoders.release({g.model for g in view.filled})
        self._preload(view)

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

"""The vector store across its generations (`schemas.index_generations`): what the pipeline and
the API write and read, whichever generations exist.

- New chunks are written to every generation being filled (the live one, and one being built),
  each with its own model's vectors (`upsert_embedded`); a batch that lacks one model's vectors
  is refused (`MissingVectors`), never written with another model's.
- Everything else that changes points (publishing, withdrawing, deleting, who may read) reaches
  every generation whose store exists, the retired one too: a deleted document is gone from
  all of them.
- Reads go to the live generation. A search pins one generation for its whole run instead
  (`store_of`): its query is embedded by that generation's model.

Which generations exist comes from a `GenerationSource`: writes take a view read lately enough
(`current`), reads the last one known (`latest`); each generation's store is opened on first
use and kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import Protocol

from core.errors import Conflict, RetryableError
from core.filters import Filter, SearchScope
from infra.vectorstore.base import (
    ChunkPoint,
    PublishedDocument,
    Rankings,
    RankQuery,
    ScoredChunk,
    StoredChunk,
    VectorQuery,
    VectorStore,
    WithdrawnDocument,
)
from schemas.chunks import ChunkPayload
from schemas.index_generations import Generations, IndexGeneration, ModelIdentity


class GenerationSource(Protocol):
    """The generations as read lately (`services.generations.watch.GenerationWatch`)."""

    async def current(self) -> Generations:
        """The generations for a write: read lately enough (ServiceUnavailable if they cannot
        be)."""
        ...

    async def latest(self) -> Generations:
        """The generations for a read: the last known, without waiting for a new read."""
        ...


OpenStore = Callable[[IndexGeneration], Awaitable[VectorStore]]


class MissingVectors(RetryableError):
    """A batch of chunks lacks the vectors of a generation being filled (it was embedded
    before that generation began): it must be embedded by that model too."""

    def __init__(self, models: Sequence[ModelIdentity]) -> None:
        labels = ", ".join(model.label for model in models)
        super().__init__(f"the chunks have no vectors of {labels}")
        self.models = tuple(models)


class GenerationalStore:
    """A `VectorStore` over the generations whose stores exist."""

    def __init__(self, source: GenerationSource, open_store: OpenStore) -> None:
        self._source = source
        self._open_store = open_store
        self._stores: dict[int, VectorStore] = {}
        self._opening = asyncio.Lock()

    async def generations(self) -> Generations:
        """The generations, as read lately enough to write by."""
        return await self._source.current()

    async def latest_generations(self) -> Generations:
        """The last known generations, to read by (never waits for a new read)."""
        return await self._source.latest()

    async def store_of(self, generation: IndexGeneration) -> VectorStore:
        """One generation's store (opened on first use)."""
        store = self._stores.get(generation.number)
        if store is not None:
            return store
        async with self._opening:
            if generation.number not in self._stores:
                self._stores[generation.number] = await self._open_store(generation)
            return self._stores[generation.number]

    async def live_store(self) -> tuple[IndexGeneration, VectorStore]:
        """The live generation (as last known) and its store: what reads go to."""
        live = (await self._source.latest()).live
        return live, await self.store_of(live)

    async def open_detached(self, generation: IndexGeneration) -> VectorStore:
        """A generation's store opened apart from the kept ones (one to drop that this
        process never opened)."""
        return await self._open_store(generation)

    async def forget(self, number: int) -> VectorStore | None:
        """Stops using generation `number`'s store (it is being dropped); the store, if it was
        open."""
        async with self._opening:
            return self._stores.pop(number, None)

    async def _kept(self) -> list[VectorStore]:
        generations = await self._source.current()
        return [await self.store_of(g) for g in generations.kept]

    async def _live(self) -> VectorStore:
        return (await self.live_store())[1]

    # --- writes -------------------------------------------------------------------------------

    async def ensure_collection(self) -> None:
        """Opens the store of every generation that exists."""
        await self._kept()

    async def upsert_embedded(self, points: Mapping[ModelIdentity, Sequence[ChunkPoint]]) -> None:
        """Writes the same chunks to every generation being filled, each with its own model's
        points (`points` by model: the same ids and payloads, each model's vectors).
        `MissingVectors` if a generation's model is not among them (nothing is written)."""
        generations = await self._source.current()
        missing = [g.model for g in generations.filled if g.model not in points]
        if missing:
            raise MissingVectors(missing)
        for generation in generations.filled:
            store = await self.store_of(generation)
            await store.upsert(points[generation.model])

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Writes points made by the live generation's model (a restore's) to it; refused
        while another generation is being built, which would lack them."""
        generations = await self._source.current()
        if generations.building is not None:
            raise Conflict(
                f"generation {generations.building.number} is being built: points of one "
                "model cannot be written now"
            )
        await (await self.store_of(generations.live)).upsert(points)

    async def publish_document(self, document: PublishedDocument) -> None:
        for store in await self._kept():
            await store.publish_document(document)

    async def withdraw_document(self, document: WithdrawnDocument) -> None:
        for store in await self._kept():
            await store.withdraw_document(document)

    async def delete(self, selector: Filter) -> None:
        for store in await self._kept():
            await store.delete(selector)

    async def set_readers(self, selector: Filter, readers: Sequence[str]) -> None:
        for store in await self._kept():
            await store.set_readers(selector, readers)

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        for store in await self._kept():
            await store.delete_points(point_ids)

    async def drop(self) -> None:
        """Refused: a generation is dropped by number (`services.generations`)."""
        raise Conflict("the vector store is dropped one generation at a time")

    # --- reads (the live generation) ----------------------------------------------------------

    async def document_chunks(
        self, tenant_id: str, document_id: str, limit: int = 10_000
    ) -> list[ChunkPayload]:
        return await (await self._live()).document_chunks(tenant_id, document_id, limit)

    async def search(self, query: VectorQuery) -> list[ScoredChunk]:
        return await (await self._live()).search(query)

    async def rank(self, query: RankQuery) -> Rankings:
        return await (await self._live()).rank(query)

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        return await (await self._live()).read(scope, point_ids, dense)

    async def count(self, selector: Filter) -> int:
        return await (await self._live()).count(selector)

    async def export_points(
        self, selector: Filter | None, batch: int = 256
    ) -> AsyncIterator[list[ChunkPoint]]:
        async for points in (await self._live()).export_points(selector, batch):
            yield points

    async def get_points(self, point_ids: Sequence[str]) -> list[ChunkPoint]:
        return await (await self._live()).get_points(point_ids)

    async def export_page(
        self, selector: Filter | None, batch: int, offset: str | None
    ) -> tuple[list[ChunkPoint], str | None]:
        return await (await self._live()).export_page(selector, batch, offset)

    async def close(self) -> None:
        """Closes every store opened."""
        stores, self._stores = self._stores, {}
        for store in stores.values():
            await store.close()

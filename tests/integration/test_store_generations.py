"""The vector store's generations (`schemas.index_generations`) on every store: the embedded
engine, a Qdrant server's API, and the embedded engine served by a store process. Each
generation is a store of its own, of its own model's vector size; writes reach every one that
exists, new chunks only with each model's own vectors; reads go to the live one; a page of an
export resumes where the last ended; a dropped generation's store is gone. Generations are
recorded in the test's MongoDB database. About 6 s in all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from core.errors import Conflict
from core.filters import SearchScope, chunks_of_document, chunks_where
from infra.mongo.client import Database
from infra.mongo.generation_repository import GenerationRepository
from infra.vectorstore.base import ChunkPoint, PublishedDocument, RankQuery, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.generational import GenerationalStore, MissingVectors
from infra.vectorstore.qdrant_server import QdrantServerStore
from infra.vectorstore.remote import RemoteVectorStore, StoreServer
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id
from schemas.index_generations import GenerationState, IndexGeneration, ModelIdentity
from services.generations.watch import GenerationWatch

SMALL = ModelIdentity(provider="hashed", dimensions=8)
LARGE = ModelIdentity(provider="hashed", dimensions=12)
EVERYONE = ("tenant",)
OpenNamed = Callable[[str, int], VectorStore]


@pytest.fixture(params=["edge", "qdrant", "remote"])
async def named(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenNamed]:
    """Opens a store by name and vector size, as a deployment of that kind does."""
    if request.param == "edge":
        yield lambda name, size: EdgeVectorStore(tmp_path / name, size)
        return
    if request.param == "qdrant":
        client = AsyncQdrantClient(location=":memory:")
        yield lambda name, size: QdrantServerStore(client, name, size, owns_client=False)
        await client.close()
        return
    server = StoreServer(lambda name, size: EdgeVectorStore(tmp_path / name, size), tmp_path / "s")
    await server.start()
    yield lambda name, size: RemoteVectorStore(tmp_path / "s", name, size)
    await server.close()


def _vector(seed: int, size: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=size).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _points(doc: str, count: int, size: int, active: bool = False) -> list[ChunkPoint]:
    return [
        ChunkPoint(
            point_id=chunk_point_id(doc, i),
            dense=_vector(hash((doc, i)) % 10_000, size),
            payload=ChunkPayload(
                tenant_id="t1", kb_id="kb1", document_id=doc, chunk_index=i,
                chunk_text=f"{doc} chunk {i}", active=active, readers=list(EVERYONE),
                source_key=f"file:{doc}", version=1,
            ),
        )
        for i in range(count)
    ]  # fmt: skip


class Deployment:
    """Generations recorded in MongoDB, and the store across them."""

    def __init__(self, db: Database, named: OpenNamed) -> None:
        self.repository = GenerationRepository(db.client, db)
        self.watch = GenerationWatch(self.repository, SMALL, refresh_s=0.0, valid_s=0.0)
        self.opened: list[VectorStore] = []

        async def open_store(generation: IndexGeneration) -> VectorStore:
            store = named(generation.store_name("chunks"), generation.model.dimensions)
            await store.ensure_collection()
            self.opened.append(store)
            return store

        self.store = GenerationalStore(self.watch, open_store)


@pytest.fixture
async def deployment(db: Database, named: OpenNamed) -> AsyncIterator[Deployment]:
    opened = Deployment(db, named)
    await opened.watch.start()
    await opened.store.ensure_collection()
    yield opened
    await opened.store.close()


async def _count(store: VectorStore, doc: str) -> int:
    return await store.count(chunks_where("t1", document_id=doc))


async def test_a_store_made_before_generations_is_the_first_and_a_new_one_stands_apart(
    deployment: Deployment,
) -> None:
    store = deployment.store
    view = await store.generations()
    assert [(g.number, g.state, g.model) for g in view.kept] == [(1, GenerationState.LIVE, SMALL)]
    await store.upsert(_points("d1", 3, 8))
    second = await deployment.repository.start(LARGE, "tok_admin", "acme")
    assert second.store_name("chunks") == "chunks-g2"
    # The first generation's own name is kept; the second is of its own size and empty.
    new = await store.store_of(second)
    assert await _count(new, "d1") == 0
    _, live = await store.live_store()
    assert await _count(live, "d1") == 3


async def test_new_chunks_reach_every_generation_filled_each_with_its_own_models_vectors(
    deployment: Deployment,
) -> None:
    store = deployment.store
    second = await deployment.repository.start(LARGE, "tok_admin", "acme")
    with pytest.raises(MissingVectors) as missing:
        await store.upsert_embedded({SMALL: _points("d1", 2, 8)})
    assert missing.value.models == (LARGE,)
    _, live = await store.live_store()
    assert await _count(live, "d1") == 0  # nothing was written
    # A restore's points (one model's) are refused while another generation is built.
    with pytest.raises(Conflict):
        await store.upsert(_points("d1", 2, 8))

    await store.upsert_embedded({SMALL: _points("d1", 2, 8), LARGE: _points("d1", 2, 12)})
    new = await store.store_of(second)
    assert await _count(live, "d1") == await _count(new, "d1") == 2
    (copy,) = await new.get_points([chunk_point_id("d1", 0)])
    assert copy.dense.shape == (12,)


async def test_publishing_and_deleting_reach_every_generation_and_reads_go_to_the_live_one(
    deployment: Deployment,
) -> None:
    store = deployment.store
    second = await deployment.repository.start(LARGE, "tok_admin", "acme")
    await store.upsert_embedded({SMALL: _points("d1", 2, 8), LARGE: _points("d1", 2, 12)})
    await store.publish_document(
        PublishedDocument("t1", "kb1", "d1", "file:d1", 1, keep_chunks=2, readers=EVERYONE)
    )
    new = await store.store_of(second)
    _, live = await store.live_store()
    for generation in (live, new):
        assert await generation.count(chunks_where("t1", document_id="d1", active=True)) == 2
    # The live generation answers, with its own size of vectors.
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    ranked = await store.rank(RankQuery(scope, _vector(1, 8), 5))
    assert len(ranked.dense) == 2
    await store.delete(chunks_of_document("t1", "d1"))
    assert await _count(live, "d1") == await _count(new, "d1") == 0


async def test_an_export_resumes_from_where_its_last_page_ended(deployment: Deployment) -> None:
    _, live = await deployment.store.live_store()
    await live.upsert(_points("d1", 7, 8))
    seen: list[str] = []
    offset: str | None = None
    while True:
        page, offset = await live.export_page(None, 3, offset)
        seen.extend(p.point_id for p in page)
        if offset is None:
            break
    assert sorted(seen) == sorted(chunk_point_id("d1", i) for i in range(7))
    assert len(seen) == len(set(seen))
    found = await live.get_points([chunk_point_id("d1", 2), chunk_point_id("nope", 0)])
    assert [p.point_id for p in found] == [chunk_point_id("d1", 2)]
    assert found[0].payload.chunk_text == "d1 chunk 2"


async def test_a_switch_makes_the_new_generation_answer_and_a_dropped_one_is_gone(
    deployment: Deployment, named: OpenNamed
) -> None:
    store, repository = deployment.store, deployment.repository
    second = await repository.start(LARGE, "tok_admin", "acme")
    await store.upsert_embedded({SMALL: _points("d1", 2, 8), LARGE: _points("d1", 3, 12)})
    assert await repository.claim(second.number, "me", 30.0) is not None
    view = await repository.switch(second.number, "me", grace=timedelta())
    assert view.live.number == 2
    # The process's view follows (read again in the background, never waited for).
    for _ in range(200):
        live, live_store = await store.live_store()
        if live.number == 2:
            break
        await asyncio.sleep(0.01)
    assert live.number == 2
    assert await _count(live_store, "d1") == 3
    (retired,) = [g for g in view.kept if g.number == 1]
    assert retired.state is GenerationState.RETIRED
    old = await store.forget(1)
    assert old is not None
    await old.drop()
    await repository.dropped(1)
    reopened = named("chunks", 8)
    await reopened.ensure_collection()
    assert await _count(reopened, "d1") == 0  # made anew: the dropped one's points are gone
    await reopened.close()

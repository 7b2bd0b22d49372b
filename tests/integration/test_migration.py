"""Changing the embedding model: a generation built from the chunks already made, beside the
live one, then switched to (`services.generations.migration`). On the embedded engine, with
generations recorded in the test's MongoDB database, and the hashed embedder at two sizes (the
models differ: their vectors are of different sizes, so no answer can mix them unseen). About
12 s in all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.filters import chunks_of_document, chunks_where
from core.sparse import SparseEncoder
from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.mongo.audit_repository import AuditRepository
from infra.mongo.client import Database
from infra.mongo.generation_repository import GenerationRepository
from infra.settings.generations import GenerationSettings
from infra.vectorstore.base import ChunkPoint, PublishedDocument, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.generational import GenerationalStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id
from schemas.index_generations import GenerationState, IndexGeneration, ModelIdentity
from services.generations.migration import Migrator
from services.generations.watch import GenerationWatch
from services.search.retrieval import Retriever
from services.search.retrievers import Retrievers
from tests.generations import hashed_encoders

OLD = ModelIdentity(provider="hashed", dimensions=16)
NEW = ModelIdentity(provider="hashed", dimensions=24)
EVERYONE = ("tenant",)
DOCUMENTS = 12
CHUNKS = 3  # per document


@dataclass
class Deployment:
    """A deployment's generations, store and models, as the index stage's process holds them."""

    repository: GenerationRepository
    store: GenerationalStore
    settings: GenerationSettings
    db: Database
    encoders: Encoders

    def migrator(self, owner: str, **changes: float) -> Migrator:
        settings = self.settings.model_copy(update=changes)
        return Migrator(self.repository, self.store, self.encoders, settings, owner)

    async def embedder(self, model: ModelIdentity) -> Embedder:
        return await self.encoders.get(model)

    async def live(self) -> tuple[IndexGeneration, VectorStore]:
        """The live generation as recorded now (a process's view follows within a refresh),
        and its store."""
        kept = await self.repository.kept()
        assert kept is not None
        return kept.live, await self.store.store_of(kept.live)


def _payload(doc: str, i: int, readers: tuple[str, ...] = EVERYONE) -> ChunkPayload:
    return ChunkPayload(
        tenant_id="t1", kb_id="kb1", document_id=doc, chunk_index=i, version=1,
        chunk_text=f"{doc} is about topic {i} and item {doc[-1]}", active=True,
        readers=list(readers), source_key=f"file:{doc}",
    )  # fmt: skip


async def _embedded(
    deployment: Deployment, model: ModelIdentity, payloads: list[ChunkPayload]
) -> list[ChunkPoint]:
    vectors = (await deployment.embedder(model)).embed_documents(
        [p.embedding_text for p in payloads]
    )
    sparse = SparseEncoder()
    return [
        ChunkPoint(
            point_id=chunk_point_id(p.document_id, p.chunk_index),
            dense=vectors[row],
            payload=p,
            sparse=sparse.document(p.embedding_text),
        )
        for row, p in enumerate(payloads)
    ]


async def _add(deployment: Deployment, doc: str, models: tuple[ModelIdentity, ...]) -> None:
    """A document's chunks written as the index stage writes them, and published."""
    payloads = [_payload(doc, i) for i in range(CHUNKS)]
    await deployment.store.upsert_embedded(
        {model: await _embedded(deployment, model, payloads) for model in models}
    )
    await deployment.store.publish_document(
        PublishedDocument("t1", "kb1", doc, f"file:{doc}", 1, CHUNKS, EVERYONE)
    )


@pytest.fixture
async def deployment(db: Database, tmp_path: Path) -> AsyncIterator[Deployment]:
    settings = GenerationSettings(
        refresh_s=0.05, valid_s=0.5, grace_s=0.0, copy_batch=4, lease_s=1.5
    )
    repository = GenerationRepository(db.client, db)
    watch = GenerationWatch(repository, OLD, settings.refresh_s, settings.valid_s)

    async def open_store(generation: IndexGeneration) -> VectorStore:
        store = EdgeVectorStore(
            tmp_path / generation.store_name("vectors"), generation.model.dimensions
        )
        await store.ensure_collection()
        return store

    store = GenerationalStore(watch, open_store)
    await store.ensure_collection()
    opened = Deployment(repository, store, settings, db, hashed_encoders(OLD.dimensions, tmp_path))
    for n in range(DOCUMENTS):
        await _add(opened, f"doc{n:02d}", (OLD,))
    yield opened
    await store.close()


async def _state(store: VectorStore) -> dict[str, dict[str, object]]:
    """Every point's payload, by id."""
    found: dict[str, dict[str, object]] = {}
    async for batch in store.export_points(None):
        found.update((p.point_id, p.payload.to_store()) for p in batch)
    return found


async def _progress_until(deployment: Deployment, number: int, done: bool = False) -> None:
    """Waits until generation `number` has copied a batch (or, with `done`, everything)."""
    for _ in range(2_000):
        generation = await deployment.repository.get(number)
        assert generation is not None
        progress = generation.progress
        if (progress.copied if done else progress.done > 0) or (
            generation.state is not GenerationState.BUILDING
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"generation {number} made no progress")


async def _until(condition: Callable[[], Awaitable[bool]], timeout_s: float = 20.0) -> bool:
    """Whether `condition` came true within `timeout_s` (asked every 50 ms)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if await condition():
            return True
        await asyncio.sleep(0.05)
    return False


async def _switched_by(deployment: Deployment, migrator: Migrator, number: int) -> bool:
    """Whether `migrator` has made generation `number` live (it builds it meanwhile)."""
    await migrator.work()
    kept = await deployment.repository.kept()
    return kept is not None and kept.live.number == number


async def _searches_generation(retrievers: Retrievers, number: int) -> bool:
    return (await retrievers.live())[0] == number


async def _dropped(migrator: Migrator, number: int) -> bool:
    return number in await migrator.drop_due()


async def test_a_migration_embeds_every_chunk_by_the_new_model_then_switches_searches(
    deployment: Deployment,
) -> None:
    before = await _state((await deployment.live())[1])
    started = await deployment.repository.start(NEW, "tok_admin", "acme")
    await deployment.migrator("a", grace_s=3600).work()

    live, store = await deployment.live()
    assert (live.number, live.model) == (started.number, NEW)
    assert await _state(store) == before  # every chunk, as it was
    # Each vector is the new model's, of its text.
    new_model = await deployment.embedder(NEW)
    point = chunk_point_id("doc03", 1)
    (copy,) = await store.get_points([point])
    expected = new_model.embed_documents([_payload("doc03", 1).embedding_text])[0]
    np.testing.assert_allclose(copy.dense, expected, rtol=1e-5)
    # The switch is in the audit log, and the old generation waits for its drop.
    entries = await AuditRepository(deployment.db).page("acme", 10)
    assert [(e.method, e.path) for e in entries] == [("SWITCH", "/api/v1/generations/2")]
    assert entries[0].details is not None
    assert entries[0].details["retired"]["generation"] == 1
    retired = await deployment.repository.get(1)
    assert retired is not None
    assert retired.state is GenerationState.RETIRED

    # A search takes the live generation's retriever: the new model's, on its store.
    def make(embedder: Embedder, vectors: VectorStore) -> Retriever:
        return Retriever(embedder, vectors, SparseEncoder(), depth=10)

    retrievers = Retrievers(deployment.store, deployment.encoders, make)
    # The process's view follows within a refresh (read in the background, never waited for).
    assert await _until(lambda: _searches_generation(retrievers, 2))
    number, retriever = await retrievers.live()
    assert number == 2
    assert retriever.dimensions == NEW.dimensions
    vector = await retriever.embed("doc03 topic 1")
    assert vector.shape == (NEW.dimensions,)

    # It is dropped after its grace, or at once on request.
    assert await deployment.migrator("a", grace_s=3600).drop_due() == []
    await deployment.repository.drop_now(1)
    assert await deployment.migrator("a", grace_s=3600).drop_due() == [1]
    dropped = await deployment.repository.get(1)
    assert dropped is not None
    assert dropped.state is GenerationState.DROPPED


async def test_a_build_stopped_right_after_its_switch_still_leaves_the_switch_audited(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build's holder stops it (its lease, renewed meanwhile, is nobody's once the
    # generation is live) the moment the switch returns: the audit entry is there all the same.
    switch = deployment.repository.switch

    async def switched_then_stopped(*args: Any, **kwargs: Any) -> Any:
        await switch(*args, **kwargs)
        raise asyncio.CancelledError

    monkeypatch.setattr(deployment.repository, "switch", switched_then_stopped)
    await deployment.repository.start(NEW, "tok_admin", "acme")
    # The build ends stopped, or (its lease renewal having found the generation live first)
    # with its lease lost: either way after its switch.
    with contextlib.suppress(asyncio.CancelledError):
        await deployment.migrator("a", grace_s=3600).work()
    live, _ = await deployment.live()
    assert live.model == NEW
    entries = await AuditRepository(deployment.db).page("acme", 10)
    assert [(e.method, e.path) for e in entries] == [
        ("SWITCH", f"/api/v1/generations/{live.number}")
    ]


async def test_changes_during_the_migration_are_all_there_after_the_switch(
    deployment: Deployment,
) -> None:
    """Uploads, replacements, deletes and changes of who may read, made while the new
    generation is built; and what a copy racing them could have left behind (a deleted
    document's chunk written back, an older payload, a chunk missing): the checks mend it."""
    started = await deployment.repository.start(NEW, "tok_admin", "acme")
    # A long settle: the changes come after the copy, before the checks.
    migration = asyncio.create_task(deployment.migrator("a", valid_s=1.0, grace_s=3600).work())
    await _progress_until(deployment, started.number, done=True)
    target = await deployment.store.store_of(started)

    await _add(deployment, "doc90", (OLD, NEW))  # an upload
    await _add(deployment, "doc00", (OLD, NEW))  # a new run of the same document
    await deployment.store.delete(chunks_of_document("t1", "doc01"))  # a delete
    await deployment.store.set_readers(chunks_of_document("t1", "doc02"), ["user:ann"])
    # What a copy racing those could have written: the deleted document's chunk back, the
    # old readers, and a chunk it had not reached yet.
    resurrected = await _embedded(deployment, NEW, [_payload("doc01", 0)])
    stale = await _embedded(deployment, NEW, [_payload("doc02", 1)])
    await target.upsert([*resurrected, *stale])
    await target.delete_points([chunk_point_id("doc05", 2)])

    await migration
    live, store = await deployment.live()
    assert live.number == started.number
    first = await deployment.repository.get(1)
    assert first is not None
    assert first.state is GenerationState.RETIRED
    old = await deployment.store.store_of(first)
    assert await _state(store) == await _state(old)
    assert await store.count(chunks_where("t1", document_id="doc01")) == 0
    assert await store.count(chunks_where("t1", document_id="doc90")) == CHUNKS
    (readers,) = await store.get_points([chunk_point_id("doc02", 1)])
    assert readers.payload.readers == ["user:ann"]
    generation = await deployment.repository.get(started.number)
    assert generation is not None
    assert generation.progress.check_pass >= 2  # one pass mended, the last found nothing
    assert generation.progress.mended == 0


async def test_a_build_whose_process_died_is_resumed_from_where_it_stopped(
    deployment: Deployment,
) -> None:
    started = await deployment.repository.start(NEW, "tok_admin", "acme")
    first = asyncio.create_task(deployment.migrator("a", copy_batch=2).work())
    await _progress_until(deployment, started.number)
    first.cancel()  # the process is gone: its lease is not renewed
    with pytest.raises(asyncio.CancelledError):
        await first
    stopped = await deployment.repository.get(started.number)
    assert stopped is not None
    assert 0 < stopped.progress.done < DOCUMENTS * CHUNKS
    assert stopped.progress.cursor is not None
    # Another process is refused while the lease holds, then resumes once it runs out.
    other = deployment.migrator("b")
    await other.work()
    assert (await deployment.live())[0].number == 1
    assert await _until(lambda: _switched_by(deployment, other, started.number))
    live, store = await deployment.live()
    assert live.number == started.number
    finished = await deployment.repository.get(started.number)
    assert finished is not None
    assert finished.progress.done == DOCUMENTS * CHUNKS  # each chunk copied once
    assert await store.count(chunks_where("t1")) == DOCUMENTS * CHUNKS


async def test_a_cancelled_build_leaves_the_live_generation_serving_and_its_store_goes(
    deployment: Deployment, tmp_path: Path
) -> None:
    before = await _state((await deployment.live())[1])
    started = await deployment.repository.start(NEW, "tok_admin", "acme")
    building = asyncio.create_task(deployment.migrator("a", valid_s=2.0).work())
    await _progress_until(deployment, started.number, done=True)
    await deployment.repository.cancel(started.number, "cancelled by tok_admin")
    await asyncio.wait_for(building, timeout=10)  # the build stops at its next renewal
    live, store = await deployment.live()
    assert live.number == 1
    assert await _state(store) == before
    # Once every process has stopped writing to it (`settle_s`), its store is dropped.
    janitor = deployment.migrator("a", valid_s=2.0)
    assert await janitor.drop_due() == []
    assert await _until(lambda: _dropped(janitor, started.number))
    assert not (tmp_path / started.store_name("vectors")).exists()

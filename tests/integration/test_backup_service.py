"""Backup and restore against the real MongoDB server and the embedded vector store: a
tenant's snapshot holds that tenant only; a restore that fails part-way is undone; one that
was interrupted is finished only by the same snapshot."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.errors import Conflict, ServiceUnavailable, SnapshotInvalid
from core.filters import Filter, Match
from devstack.launcher import LocalServices
from infra.files.snapshot_files import MANIFEST
from infra.kafka.client import build_broker, ensure_topics
from infra.mongo.client import DOCUMENTS, KB_CODES, KNOWLEDGE_BASES
from infra.mongo.indexes import ensure_indexes
from infra.mongo.snapshot import COLLECTIONS, MongoSnapshot
from infra.settings.vectorstore import QdrantSettings
from infra.vectorstore.base import ChunkPoint, VectorStore
from ragline.system import System
from schemas.chunks import ChunkPayload
from schemas.domain import ParseStatus, Record, chunk_point_id
from schemas.topics import ALL_TOPICS
from services.backup_service import BackupService
from services.policy_service import Submission
from tests.conftest import settings_for
from tests.generations import only_generation

DIM = 384


@pytest.fixture
async def systems(local_services: LocalServices, tmp_path: Path) -> AsyncIterator[list[System]]:
    """Two deployments: each a database and a vector store of its own (one Kafka)."""
    async with AsyncExitStack() as stack:
        opened = []
        for name in ("a", "b"):
            settings = settings_for(local_services, qdrant=QdrantSettings(path=tmp_path / name))
            await ensure_topics(settings.kafka, ALL_TOPICS)
            broker = build_broker(settings.kafka, f"test-backup-{name}")
            await broker.start()
            stack.push_async_callback(broker.stop)
            system = System(settings, stack, broker)
            await system.open_vector_store()
            await ensure_indexes(system.db)
            opened.append(system)
        yield opened
        for system in opened:
            await system.mongo.drop_database(system.settings.mongo.database)


def _service(system: System, store: VectorStore | None = None) -> BackupService:
    """The system's backups, or with `store` as the system's only generation (one that
    fails)."""
    generational = system.store
    if store is not None:
        generational = only_generation(system.db, store, DIM, system.settings.embedding.provider)
    return BackupService(
        MongoSnapshot(system.mongo, system.db), generational, system.lifecycle, system.events
    )


async def _tenant(system: System, tenant_id: str, texts: Sequence[str]) -> list[str]:
    """A KB (with a code) of records; each record's document marked indexed with its one point
    written, but the first, left queued (in progress when a snapshot is taken)."""
    code = f"{tenant_id}-{uuid.uuid4().hex[:8]}"
    kb = await system.knowledge_base_service.create(tenant_id, "Notes", code=code)
    records = [Record(external_id=f"r{i}", title=f"R{i}", content=t) for i, t in enumerate(texts)]
    ingested = await system.intake_service.accept_records(
        tenant_id, kb.id, records, Submission.connector()
    )
    ids = [item.document.id for item in ingested]
    points = [
        ChunkPoint(
            chunk_point_id(document_id, 0),
            np.random.default_rng(i).normal(size=DIM).astype(np.float32),
            ChunkPayload(
                tenant_id=tenant_id, kb_id=kb.id, document_id=document_id, chunk_index=0,
                chunk_text=text, active=True, readers=["tenant"],
            ),
        )
        for i, (document_id, text) in enumerate(zip(ids, texts, strict=True))
    ]  # fmt: skip
    await system.store.upsert(points)
    await system.db[DOCUMENTS].update_many(
        {"_id": {"$in": ids[1:]}},
        {"$set": {"parse_status": "indexed", "chunk_count": 1, "indexed_chunk_count": 1}},
    )
    return ids


async def _records(system: System, tenant_id: str) -> dict[str, list[Any]]:
    """The tenant's records in every collection a backup holds: those holding the tenant's id,
    and those referring to one of the tenant's records (a KB's code, a document's stored file)."""
    found: dict[str, list[Any]] = {}
    for collection in COLLECTIONS:
        if collection.of is None:
            query: dict[str, Any] = {collection.field: tenant_id}
        else:
            query = {collection.field: {"$in": [r["_id"] for r in found[collection.of]]}}
        found[collection.name] = await system.db[collection.name].find(query).to_list()
    return found


async def _points(store: VectorStore, tenant_id: str) -> list[tuple[str, str]]:
    selector = Filter(must=(Match("tenant_id", tenant_id),))
    found = [
        (p.point_id, p.payload.chunk_text) async for b in store.export_points(selector) for p in b
    ]
    return sorted(found)


class _FailingStore:
    """The real store, whose writes fail after the first batch (a vector store going away
    in the middle of a restore)."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store
        self.batches = 0

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        self.batches += 1
        if self.batches > 1:
            raise ServiceUnavailable("vector store", "connection lost")
        await self._store.upsert(points)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_tenant_snapshot_holds_that_tenant_only_and_a_failed_restore_is_undone(
    systems: list[System], tmp_path: Path
) -> None:
    a, b = systems
    texts = [f"note {i} about the harbour" for i in range(600)]
    ids = await _tenant(a, "acme", texts)
    await _tenant(a, "globex", ["another tenant's note"])
    manifest = await _service(a).backup("acme", tmp_path / "snap")
    assert manifest.documents == {"indexed": 599, "queued": 1}
    assert manifest.records["vectors/points.jsonl.gz"] == 600
    assert manifest.records[f"mongo/{KNOWLEDGE_BASES}.jsonl.gz"] == 1
    points_file = (tmp_path / "snap/vectors/points.jsonl.gz").read_bytes()
    assert b"globex" not in points_file

    failing = _FailingStore((await b.store.live_store())[1])
    with pytest.raises(ServiceUnavailable, match="was undone"):
        await _service(b, failing).restore("acme", tmp_path / "snap")
    assert failing.batches == 2
    assert await MongoSnapshot(b.mongo, b.db).holds("acme") is None
    assert all(not records for records in (await _records(b, "acme")).values())
    assert await b.store.count(Filter(must=(Match("tenant_id", "acme"),))) == 0
    assert await MongoSnapshot(b.mongo, b.db).interrupted_restore("tenant:acme") is None

    report = await _service(b).restore("acme", tmp_path / "snap")
    assert report.points == 600
    assert report.restarted_documents == [ids[0]]
    before, after = await _records(a, "acme"), await _records(b, "acme")
    # Collections keyed by the tenant and by reference are both compared.
    assert before[KNOWLEDGE_BASES]
    assert before[KB_CODES]
    for name, records in before.items():
        if name != DOCUMENTS:
            assert after[name] == records, name
    restored = {d["_id"]: d for d in after[DOCUMENTS]}
    for document in before[DOCUMENTS]:
        if document["_id"] == ids[0]:  # started again: a new generation, queued
            assert restored[ids[0]]["generation"] == document["generation"] + 1
            assert restored[ids[0]]["parse_status"] == ParseStatus.QUEUED
        else:
            assert restored[document["_id"]] == document
    assert await _points(b.store, "acme") == await _points(a.store, "acme") != []
    assert await _points(b.store, "globex") == []
    assert all(not records for records in (await _records(b, "globex")).values())

    # Into a tenant that holds data now: refused.
    with pytest.raises(Conflict, match="already holds data"):
        await _service(b).restore("acme", tmp_path / "snap")


async def test_an_interrupted_restore_is_finished_by_the_same_snapshot_only(
    systems: list[System], tmp_path: Path
) -> None:
    a, b = systems
    await _tenant(a, "acme", ["the harbour opens at six"])
    await _service(a).backup(None, tmp_path / "snap")
    await _tenant(a, "acme", ["the harbour closes at ten"])
    await _service(a).backup(None, tmp_path / "other")
    # A restore of the first snapshot died after writing the KB.
    target = MongoSnapshot(b.mongo, b.db)
    fingerprint = hashlib.sha256((tmp_path / "snap" / MANIFEST).read_bytes()).hexdigest()
    await target.begin_restore("deployment", fingerprint)
    written = await a.db[KNOWLEDGE_BASES].find_one()
    assert written is not None
    await b.db[KNOWLEDGE_BASES].insert_one(written)

    with pytest.raises(Conflict, match="was interrupted"):
        await _service(b).restore(None, tmp_path / "other")
    with pytest.raises(SnapshotInvalid, match="snapshot of the whole deployment"):
        await _service(b).restore("acme", tmp_path / "snap")
    report = await _service(b).restore(None, tmp_path / "snap")
    assert report.records[KNOWLEDGE_BASES] == 1
    assert await target.interrupted_restore("deployment") is None
    assert await b.db[DOCUMENTS].count_documents({}) == 1


class _GoneStore(_FailingStore):
    """The real store, gone after the first batch: writes fail, and so do deletes."""

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        raise ServiceUnavailable("vector store", "connection lost")


async def test_a_restore_that_cannot_be_undone_says_so_and_the_same_snapshot_finishes_it(
    systems: list[System], tmp_path: Path
) -> None:
    a, b = systems
    await _tenant(a, "acme", [f"note {i} about the harbour" for i in range(600)])
    await _service(a).backup(None, tmp_path / "snap")
    with pytest.raises(ServiceUnavailable, match="could not be taken away"):
        await _service(b, _GoneStore(b.store)).restore(None, tmp_path / "snap")
    target = MongoSnapshot(b.mongo, b.db)
    assert await target.interrupted_restore("deployment") is not None
    report = await _service(b).restore(None, tmp_path / "snap")
    assert report.points == 600
    assert await target.interrupted_restore("deployment") is None
    assert await _points(b.store, "acme") == await _points(a.store, "acme")

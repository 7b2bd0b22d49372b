"""Backup and restore of a deployment, or of one tenant: MongoDB's records (stored files
included) and the vector store's points, as one checked snapshot (`infra.files.snapshot_files`),
restored all or nothing into an empty target. How it stays consistent without stopping the
pipeline: docs/backup.md."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pymongo.errors import PyMongoError

from core.errors import Conflict, NotFound, RaglineError, ServiceUnavailable, SnapshotInvalid
from core.filters import Filter, Match
from core.sparse import SparseVector
from infra.files.snapshot_files import (
    MANIFEST,
    EmbeddingIdentity,
    Manifest,
    SnapshotFile,
    append_lines,
    new_file,
    read_lines,
    verify,
    write_lines,
    write_manifest,
)
from infra.mongo.client import DOCUMENTS, MongoDoc
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender, Pending
from infra.mongo.snapshot import BATCH, MongoSnapshot, decode, encode
from infra.vectorstore.base import ChunkPoint
from infra.vectorstore.generational import GenerationalStore
from schemas.chunks import ChunkPayload
from schemas.domain import PIPELINE_ORDER, ParseStatus, utcnow

log = logging.getLogger(__name__)
T = TypeVar("T")

POINTS = "vectors/points.jsonl.gz"
# Statuses of a document the pipeline is still working on.
IN_PROGRESS = frozenset(PIPELINE_ORDER) - {ParseStatus.INDEXED}


def collection_file(name: str) -> str:
    """The snapshot file of a MongoDB collection."""
    return f"mongo/{name}.jsonl.gz"


def encode_point(point: ChunkPoint) -> bytes:
    """A point as a line of JSON (float32 values survive the round trip exactly)."""
    sparse = point.sparse
    return json.dumps(
        {
            "id": point.point_id,
            "dense": point.dense.tolist(),
            "sparse": None
            if sparse is None
            else {"indices": sparse.indices, "values": sparse.values},
            "payload": point.payload.to_store(),
        },
        separators=(",", ":"),
    ).encode()


def decode_point(line: bytes) -> ChunkPoint:
    """A point from its line."""
    raw = json.loads(line)
    sparse = raw.get("sparse")
    return ChunkPoint(
        point_id=str(raw["id"]),
        dense=np.asarray(raw["dense"], dtype=np.float32),
        payload=ChunkPayload.from_store(raw["payload"]),
        sparse=None if sparse is None else SparseVector(sparse["indices"], sparse["values"]),
    )


@dataclass
class RestoreReport:
    """What a restore wrote, and what it started again."""

    records: dict[str, int]
    points: int
    restarted_documents: list[str] = field(default_factory=list)


@dataclass
class _Written:
    """What a restore has written so far (to take it away again if it cannot finish)."""

    records: dict[str, list[Any]] = field(default_factory=dict)
    point_ids: list[str] = field(default_factory=list)
    # The documents written, with their status and what they had indexed, and their points.
    documents: dict[str, MongoDoc] = field(default_factory=dict)
    points: Counter[str] = field(default_factory=Counter)


class BackupService:
    """Takes snapshots of a deployment or a tenant, and restores them into an empty one."""

    def __init__(
        self,
        snapshot: MongoSnapshot,
        store: GenerationalStore,
        lifecycle: DocumentLifecycle,
        events: EventSender,
    ) -> None:
        self._snapshot = snapshot
        self._store = store
        self._lifecycle = lifecycle
        self._events = events
        # One backup or restore at a time in a process.
        self._busy = asyncio.Lock()

    async def backup(self, tenant_id: str | None, directory: Path) -> Manifest:
        """Writes a snapshot of the tenant (or, with None, the deployment) into the empty
        folder `directory`; returns its manifest."""
        async with self._busy:
            return await self._backup(tenant_id, directory)

    async def _backup(self, tenant_id: str | None, directory: Path) -> Manifest:
        created_at = utcnow()
        files: dict[str, SnapshotFile] = {}
        documents: set[str] = set()
        statuses: Counter[str] = Counter()
        async for collection, records in self._snapshot.read(tenant_id):
            name = collection_file(collection.name)
            if collection.name == DOCUMENTS:
                documents.update(str(record["_id"]) for record in records)
                statuses.update(str(record.get("parse_status")) for record in records)
            lines = [encode(record) for record in records]
            entry = files.get(name) or new_file(name)
            files[name] = await asyncio.to_thread(append_lines, directory, entry, lines)
        selector = None if tenant_id is None else Filter(must=(Match("tenant_id", tenant_id),))
        points = await asyncio.to_thread(write_lines, directory, POINTS, [])
        # The live generation's points, and its model: what a deployment restoring them must
        # search with.
        generation, live = await self._store.live_store()
        async for batch in live.export_points(selector):
            kept = [encode_point(p) for p in batch if p.payload.document_id in documents]
            points = await asyncio.to_thread(append_lines, directory, points, kept)
        manifest = Manifest(
            created_at=created_at,
            scope="deployment" if tenant_id is None else "tenant",
            tenant_id=tenant_id,
            embedding=EmbeddingIdentity(**generation.model.model_dump()),
            files=[*files.values(), points],
            documents=dict(sorted(statuses.items())),
        )
        manifest = await asyncio.to_thread(write_manifest, directory, manifest)
        log.info("backup of %s taken: %s", tenant_id or "the deployment", manifest.records)
        return manifest

    async def restore(self, tenant_id: str | None, directory: Path) -> RestoreReport:
        """Restores the snapshot in `directory` into the tenant (or, with None, the
        deployment), which must hold no records (see the module's docstring)."""
        async with self._busy:
            manifest = await asyncio.to_thread(verify, directory)
            self._check_fits(manifest, tenant_id)
            await self._check_model(manifest)
            fingerprint = await asyncio.to_thread(_digest, directory / MANIFEST)
            target = _target(tenant_id)
            interrupted = await self._snapshot.interrupted_restore(target)
            if interrupted is not None and interrupted != fingerprint:
                raise Conflict(
                    f"a restore of another snapshot into {_label(tenant_id)} was interrupted; "
                    "restore that snapshot again to finish it"
                )
            if interrupted is None:
                occupied = await self._snapshot.holds(tenant_id)
                if occupied is not None:
                    raise Conflict(
                        f"{_label(tenant_id)} already holds data ({occupied}): a snapshot is "
                        "restored only into an empty deployment, or a tenant with no data"
                    )
                await self._snapshot.begin_restore(target, fingerprint)
            written = _Written()
            try:
                await self._write(directory, manifest, written)
            except (RaglineError, PyMongoError) as exc:
                if await self._undo(written, target):
                    raise ServiceUnavailable(
                        "restore", f"stopped and was undone, nothing of it is kept: {exc}"
                    ) from exc
                raise ServiceUnavailable(
                    "restore",
                    f"stopped, and what it wrote could not be taken away ({exc}); restore the "
                    "same snapshot again to finish it (nothing else can be restored there first)",
                ) from exc
            await self._snapshot.end_restore(target)
            restarted = await self._restart_unfinished(written)
            report = RestoreReport(
                records={name: len(ids) for name, ids in written.records.items()},
                points=len(written.point_ids),
                restarted_documents=restarted,
            )
            log.info("snapshot restored into %s: %s", _label(tenant_id), report)
            return report

    def _check_fits(self, manifest: Manifest, tenant_id: str | None) -> None:
        if tenant_id is None and manifest.scope != "deployment":
            raise SnapshotInvalid(
                f"this is a snapshot of tenant {manifest.tenant_id!r}: restore it as that "
                "tenant's admin, not into the whole deployment"
            )
        if tenant_id is not None and (manifest.scope, manifest.tenant_id) != ("tenant", tenant_id):
            what = (
                "the whole deployment"
                if manifest.scope == "deployment"
                else f"tenant {manifest.tenant_id!r}"
            )
            raise SnapshotInvalid(f"this is a snapshot of {what}, not of tenant {tenant_id!r}")

    async def _check_model(self, manifest: Manifest) -> None:
        """The snapshot's vectors must be the live generation's model's."""
        made, ours = manifest.embedding, (await self._store.generations()).live.model
        if (made.provider, made.model, made.dimensions) != (
            ours.provider,
            ours.model,
            ours.dimensions,
        ):
            raise SnapshotInvalid(
                f"the snapshot's vectors were made by {made.provider} model {made.model!r} "
                f"({made.dimensions} dimensions); this deployment's live generation holds "
                f"{ours.provider} model {ours.model!r} ({ours.dimensions}): its queries cannot "
                "search them"
            )

    async def _write(self, directory: Path, manifest: Manifest, written: _Written) -> None:
        for entry in manifest.files:
            if entry.name == POINTS:
                continue
            name = entry.name.removeprefix("mongo/").removesuffix(".jsonl.gz")
            ids = written.records.setdefault(name, [])
            async for records in _batches(directory, entry, decode):
                await self._snapshot.write(name, records)
                ids.extend(record["_id"] for record in records)
                if name == DOCUMENTS:
                    written.documents.update((str(r["_id"]), r) for r in records)
        points_file = manifest.file(POINTS)
        if points_file is None:
            return
        async for points in _batches(directory, points_file, decode_point):
            await self._store.upsert(points)
            written.point_ids.extend(point.point_id for point in points)
            written.points.update(point.payload.document_id for point in points)

    async def _undo(self, written: _Written, target: str) -> bool:
        """Takes away what the restore wrote; whether it could (if not, the marker stays)."""
        try:
            for start in range(0, len(written.point_ids), BATCH):
                await self._store.delete_points(written.point_ids[start : start + BATCH])
            for name, ids in reversed(written.records.items()):
                await self._snapshot.remove(name, ids)
            await self._snapshot.end_restore(target)
        except (RaglineError, PyMongoError):
            log.exception("undoing a failed restore failed: restore the snapshot again")
            return False
        return True

    async def _restart_unfinished(self, written: _Written) -> list[str]:
        """Starts the pipeline again on the documents it had not finished, and on indexed ones
        whose points the snapshot does not all hold."""
        events: list[Pending] = []
        restarted: list[str] = []
        for document_id, record in written.documents.items():
            status = record.get("parse_status")
            unfinished = status in IN_PROGRESS or (
                status == ParseStatus.INDEXED
                and written.points[document_id] < int(record.get("indexed_chunk_count", 0))
            )
            if not unfinished:
                continue
            try:
                _, event = await self._lifecycle.restart(
                    document_id, redrives=int(record.get("redrives", 0))
                )
            except NotFound:
                continue
            events.append(event)
            restarted.append(document_id)
        await self._events.send_now(events)
        return restarted


async def _batches(
    directory: Path, entry: SnapshotFile, parse: Callable[[bytes], T]
) -> AsyncIterator[list[T]]:
    """The file's records, parsed, in batches read off the event loop."""
    lines = read_lines(directory, entry)

    def next_batch() -> list[T]:
        return [parse(line) for _, line in zip(range(BATCH), lines, strict=False)]

    while batch := await asyncio.to_thread(next_batch):
        yield batch


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _target(tenant_id: str | None) -> str:
    return "deployment" if tenant_id is None else f"tenant:{tenant_id}"


def _label(tenant_id: str | None) -> str:
    return "the deployment" if tenant_id is None else f"tenant {tenant_id!r}"

"""Building a generation for another embedding model, and making it live
(`schemas.index_generations`).

One process at a time builds a generation: it claims it (a lease, renewed while it works), and
another resumes the build where it stopped once a crashed holder's lease runs out. The build:

1. **Copy.** Every point of the live generation, in point id order, is embedded again by the
   new model from its stored text (the chunks already made: nothing is extracted or chunked
   again) and written with the same id, payload and sparse vector. The position is saved after
   each batch, so a restart goes on from there.
2. **Check.** Meanwhile every process writes what changes to both generations (new chunks with
   each model's vectors, deletes, publishing, who may read: `infra.vectorstore.generational`).
   A copy may still have written a point's older state, or a point deleted after it was read.
   So once every process is sure to write to both (`GenerationSettings.settle_s` after the
   build began), the two are compared point by point, by id and payload, and each difference
   is mended from the live one; passes repeat until one finds nothing to mend.
3. **Switch.** In one MongoDB transaction the new generation becomes live and the old one is
   retired; the switch is written to the audit log. Searches switch within a refresh: each
   search keeps the generation it began with. The retired store is dropped after the grace
   period (`drop_due`).

A cancelled build's store is dropped; the live generation was never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from core.errors import PermanentError, RetryableError
from core.filters import Filter
from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.mongo.audit_repository import new_audit_id
from infra.mongo.generation_repository import GenerationRepository
from infra.process.metrics import MIGRATION_CHUNKS, MIGRATION_TOTAL
from infra.settings.generations import GenerationSettings
from infra.vectorstore.base import ChunkPoint, VectorStore
from infra.vectorstore.generational import GenerationalStore
from schemas.domain import AuditEntry, Role, utcnow
from schemas.index_generations import IndexGeneration, MigrationProgress

log = logging.getLogger(__name__)

# Points compared at a time by a check pass.
CHECK_BATCH = 256
# What a count of every point selects.
_EVERYTHING = Filter()


class LeaseLost(RetryableError):
    """Another process took the build over (this one was too slow to renew its lease), or the
    build was cancelled."""


def process_owner() -> str:
    """This process's name as a build's holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Migrator:
    """Builds the generation being built, if this process can claim it."""

    def __init__(
        self,
        generations: GenerationRepository,
        store: GenerationalStore,
        encoders: Encoders,
        settings: GenerationSettings,
        owner: str | None = None,
    ) -> None:
        self._generations = generations
        self._store = store
        self._encoders = encoders
        self._settings = settings
        self._owner = owner or process_owner()

    async def work(self) -> None:
        """Builds the generation being built if there is one and nobody else holds it, until
        it is live, cancelled or taken over; then drops the stores that are due."""
        kept = await self._generations.kept()
        building = kept.building if kept is not None else None
        if building is not None:
            claimed = await self._generations.claim(
                building.number, self._owner, self._settings.lease_s
            )
            if claimed is not None:
                try:
                    await self._holding(claimed)
                except LeaseLost as exc:
                    log.warning("stopped building generation %d: %s", building.number, exc)
                except PermanentError as exc:
                    # The same would happen again (the model does not load in this process, or
                    # makes vectors of another size): the build ends, saying why.
                    log.error("cannot build generation %d: %s", building.number, exc)
                    await self._generations.cancel(building.number, f"the build failed: {exc}")
        await self.drop_due()

    async def _holding(self, generation: IndexGeneration) -> None:
        """Builds `generation` while renewing the lease; a lost lease stops the build."""
        build = asyncio.create_task(self._build(generation))
        renew_every = self._settings.lease_s / 3
        try:
            while not build.done():
                await asyncio.wait({build}, timeout=renew_every)
                if build.done():
                    break
                if (
                    await self._generations.claim(
                        generation.number, self._owner, self._settings.lease_s
                    )
                    is None
                ):
                    build.cancel()
                    raise LeaseLost(f"generation {generation.number} is no longer ours to build")
            build.result()
        finally:
            if not build.done():
                build.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await build

    async def _build(self, generation: IndexGeneration) -> None:
        # The build's own embedder, at a lower CPU priority than the process's searches, let
        # go when the build ends.
        embedder = await asyncio.to_thread(
            self._encoders.background, generation.model, self._settings.copy_parallelism
        )
        try:
            await self._build_with(generation, embedder)
        finally:
            embedder.close()

    async def _build_with(self, generation: IndexGeneration, embedder: Embedder) -> None:
        target = await self._store.store_of(generation)
        live_generation, live = await self._store.live_store()
        progress = generation.progress
        log.info(
            "building generation %d (%s) from generation %d (%s)",
            generation.number,
            generation.model.label,
            live_generation.number,
            live_generation.model.label,
        )
        if not progress.copied:
            progress = await self._copy(generation, live, target, embedder, progress)
        # Until every process writes to both generations, a check could pass while a write
        # to the live one alone is still to come.
        settled_at = generation.created_at + timedelta(seconds=self._settings.settle_s)
        wait_s = (settled_at - utcnow()).total_seconds()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        while True:
            mended = await self._check(live, target, embedder)
            progress = progress.model_copy(
                update={
                    "check_pass": progress.check_pass + 1,
                    "mended": mended,
                    "updated_at": utcnow(),
                }
            )
            await self._save(generation, progress)
            log.info(
                "generation %d: check pass %d mended %d points",
                generation.number,
                progress.check_pass,
                mended,
            )
            if mended == 0:
                break
        await self._switch(generation, live_generation)

    async def _copy(
        self,
        generation: IndexGeneration,
        live: VectorStore,
        target: VectorStore,
        embedder: Embedder,
        progress: MigrationProgress,
    ) -> MigrationProgress:
        """Copies every point of `live` into `target`, embedded by `embedder`, from the saved
        position on; the next page is read while one is embedded."""
        if progress.total == 0:
            progress = progress.model_copy(update={"total": await live.count(_EVERYTHING)})
            await self._save(generation, progress)
        MIGRATION_TOTAL.labels(str(generation.number)).set(progress.total)
        batch = self._settings.copy_batch
        started, done_before = time.monotonic(), progress.done
        page = await live.export_page(None, batch, progress.cursor)
        while True:
            points, following = page
            embedding = asyncio.create_task(_embedded(embedder, points))
            reading = (
                asyncio.create_task(live.export_page(None, batch, following))
                if following is not None
                else None
            )
            copies = await embedding
            await target.upsert(copies)
            MIGRATION_CHUNKS.labels(str(generation.number)).inc(len(copies))
            elapsed = time.monotonic() - started
            done = progress.done + len(copies)
            progress = progress.model_copy(
                update={
                    "done": done,
                    "cursor": following,
                    "copied": following is None,
                    "updated_at": utcnow(),
                    "rate_per_s": round((done - done_before) / elapsed, 1) if elapsed else 0.0,
                }
            )
            await self._save(generation, progress)
            if reading is None:
                return progress
            page = await reading

    async def _check(self, live: VectorStore, target: VectorStore, embedder: Embedder) -> int:
        """Compares the two generations point by point and mends `target` where it differs
        from `live`: a point missing is copied, one that is no longer live is deleted, and one
        whose payload differs takes the live one's (embedded again only if its text
        changed). Returns how many points were mended."""
        mended = 0
        offset: str | None = None
        while True:
            points, offset = await live.export_page(None, CHECK_BATCH, offset)
            theirs = {p.point_id: p for p in await target.get_points([p.point_id for p in points])}
            stale = [p for p in points if _differs(p, theirs.get(p.point_id))]
            if stale:
                rewritten = [p for p in stale if not _same_text(p, theirs.get(p.point_id))]
                vectors = await _embedded(embedder, rewritten)
                by_id = {p.point_id: p for p in vectors}
                await target.upsert(
                    [
                        by_id.get(p.point_id) or replace(p, dense=theirs[p.point_id].dense)
                        for p in stale
                    ]
                )
                mended += len(stale)
            if offset is None:
                break
        offset = None
        while True:
            points, offset = await target.export_page(None, CHECK_BATCH, offset)
            ours = {p.point_id for p in await live.get_points([p.point_id for p in points])}
            extra = [p.point_id for p in points if p.point_id not in ours]
            if extra:
                await target.delete_points(extra)
                mended += len(extra)
            if offset is None:
                return mended

    async def _switch(self, generation: IndexGeneration, replaced: IndexGeneration) -> None:
        """Makes `generation` live, with the audit entry saying so in the same transaction (a
        build cancelled just after the switch, its lease then being nobody's, loses neither)."""
        grace = timedelta(seconds=self._settings.grace_s)
        entry = AuditEntry(
            id=new_audit_id(),
            tenant_id=generation.tenant_id or "",
            at=utcnow(),
            token_id=generation.started_by,
            role=Role.ADMIN,
            method="SWITCH",
            path=f"/api/v1/generations/{generation.number}",
            status=200,
            outcome="ok",
            details={
                "live": {"generation": generation.number, "model": generation.model.label},
                "retired": {"generation": replaced.number, "model": replaced.model.label},
            },
        )
        await self._generations.switch(generation.number, self._owner, grace, entry)
        log.warning(
            "generation %d (%s) is live; generation %d (%s) is retired and dropped after %s",
            generation.number,
            generation.model.label,
            replaced.number,
            replaced.model.label,
            grace,
        )

    async def drop_due(self) -> list[int]:
        """Drops the stores of cancelled builds and of retired generations past their grace;
        the generations dropped."""
        dropped = []
        for generation in await self._generations.due_for_drop(
            settle=timedelta(seconds=self._settings.settle_s)
        ):
            store = await self._store.forget(generation.number)
            if store is None:
                store = await self._store.open_detached(generation)
            await store.drop()
            await self._generations.dropped(generation.number)
            log.info("dropped generation %d (%s)", generation.number, generation.model.label)
            dropped.append(generation.number)
        return dropped

    async def _save(self, generation: IndexGeneration, progress: MigrationProgress) -> None:
        if not await self._generations.record_progress(generation.number, self._owner, progress):
            raise LeaseLost(f"generation {generation.number} is no longer ours to build")


async def _embedded(embedder: Embedder, points: Sequence[ChunkPoint]) -> list[ChunkPoint]:
    """The points with `embedder`'s dense vectors of their texts."""
    if not points:
        return []
    texts = [point.payload.embedding_text for point in points]
    vectors = await asyncio.to_thread(embedder.embed_documents, texts)
    return [replace(point, dense=vectors[row]) for row, point in enumerate(points)]


def _differs(live: ChunkPoint, copy: ChunkPoint | None) -> bool:
    if copy is None:
        return True
    return live.payload.to_store() != copy.payload.to_store() or live.sparse != copy.sparse


def _same_text(live: ChunkPoint, copy: ChunkPoint | None) -> bool:
    return copy is not None and live.payload.embedding_text == copy.payload.embedding_text

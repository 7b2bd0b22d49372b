"""The vector store's generations, in MongoDB (`index_generations`, one record per generation,
its number as `_id`): what `schemas.index_generations` describes.

Every change of state is one conditional write, so that two processes racing for the same
change cannot both make it: a build is started by inserting the next number (two starts
computed from the same read collide on it), and the switch, which retires the live generation
and makes the building one live, is one transaction.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import DuplicateKeyError

from core.errors import Conflict
from infra.mongo.audit_repository import audit_document
from infra.mongo.client import AUDIT, Database, MongoDoc, in_transaction, mongo_errors
from schemas.domain import AuditEntry, utcnow
from schemas.index_generations import (
    KEPT,
    Generations,
    GenerationState,
    IndexGeneration,
    MigrationProgress,
    ModelIdentity,
)

GENERATIONS = "index_generations"


def _to_doc(generation: IndexGeneration) -> MongoDoc:
    doc = generation.model_dump(mode="python")
    doc["_id"] = doc.pop("number")
    return doc


def _from_doc(doc: MongoDoc) -> IndexGeneration:
    data = {k: v for k, v in doc.items() if k not in ("_id", "owner", "lease_until")}
    return IndexGeneration(number=doc["_id"], **data)


class GenerationRepository:
    """Reads and changes the generations."""

    def __init__(self, client: AsyncMongoClient[MongoDoc], db: Database) -> None:
        self._client = client
        self._generations = db[GENERATIONS]
        self._audit = db[AUDIT]

    async def all(self) -> list[IndexGeneration]:
        """Every generation, oldest first (dropped and cancelled ones too)."""
        async with mongo_errors():
            docs = await self._generations.find({}).sort("_id", 1).to_list(None)
        return [_from_doc(doc) for doc in docs]

    async def get(self, number: int) -> IndexGeneration | None:
        """One generation, if it exists."""
        async with mongo_errors():
            doc = await self._generations.find_one({"_id": number})
        return None if doc is None else _from_doc(doc)

    async def kept(self) -> Generations | None:
        """The generations whose stores exist; None before the first is recorded."""
        async with mongo_errors():
            docs = await self._generations.find({"state": {"$in": sorted(KEPT)}}).to_list(None)
        found = tuple(sorted((_from_doc(doc) for doc in docs), key=lambda g: g.number))
        if not any(g.state is GenerationState.LIVE for g in found):
            return None
        return Generations(kept=found)

    async def adopt(self, model: ModelIdentity) -> Generations:
        """The generations, recording the first (live, with `model`: the store the deployment
        had before generations were recorded was made by its configured model) if there is
        none yet. Several processes starting at once record one."""
        kept = await self.kept()
        if kept is not None:
            return kept
        first = IndexGeneration(
            number=1, model=model, state=GenerationState.LIVE, live_since=utcnow()
        )
        try:
            async with mongo_errors():
                await self._generations.insert_one(_to_doc(first))
        except DuplicateKeyError:
            pass  # another process recorded it first
        kept = await self.kept()
        if kept is None:
            raise Conflict("the vector store has generations but none is live")
        return kept

    async def start(
        self, model: ModelIdentity, started_by: str, tenant_id: str | None = None
    ) -> IndexGeneration:
        """Records a new generation being built for `model`. Refused (`Conflict`) while
        another is being built, or when the live one already has this model."""
        generations = await self.all()
        building = next((g for g in generations if g.state is GenerationState.BUILDING), None)
        if building is not None:
            raise Conflict(
                f"generation {building.number} ({building.model.label}) is being built: "
                "cancel it or wait for it to go live"
            )
        live = next((g for g in generations if g.state is GenerationState.LIVE), None)
        if live is not None and live.model == model:
            raise Conflict(f"the live generation {live.number} already has {model.label}")
        now = utcnow()
        generation = IndexGeneration(
            number=max((g.number for g in generations), default=0) + 1,
            model=model,
            state=GenerationState.BUILDING,
            started_by=started_by,
            tenant_id=tenant_id,
            progress=MigrationProgress(started_at=now, updated_at=now),
        )
        try:
            async with mongo_errors():
                await self._generations.insert_one(_to_doc(generation))
        except DuplicateKeyError as exc:
            raise Conflict("another migration was started at the same moment") from exc
        return generation

    async def claim(self, number: int, owner: str, lease_s: float) -> IndexGeneration | None:
        """Takes (or renews) the right to build generation `number` for `lease_s`: granted
        when nobody holds it, `owner` holds it, or the holder's lease ran out (it crashed);
        None when refused or the generation is no longer being built."""
        now = utcnow()
        async with mongo_errors():
            result = await self._generations.update_one(
                {
                    "_id": number,
                    "state": GenerationState.BUILDING.value,
                    "$or": [
                        {"owner": None},
                        {"owner": owner},
                        {"lease_until": {"$lt": now}},
                    ],
                },
                {"$set": {"owner": owner, "lease_until": now + timedelta(seconds=lease_s)}},
            )
        if result.matched_count == 0:
            return None
        return await self.get(number)

    async def record_progress(self, number: int, owner: str, progress: MigrationProgress) -> bool:
        """Saves a build's progress; False if `owner` no longer holds it (or it ended)."""
        async with mongo_errors():
            result = await self._generations.update_one(
                {"_id": number, "state": GenerationState.BUILDING.value, "owner": owner},
                {"$set": {"progress": progress.model_dump(mode="python")}},
            )
        return result.matched_count == 1

    async def switch(
        self, number: int, owner: str, grace: timedelta, audit: AuditEntry | None = None
    ) -> Generations:
        """Makes the building generation `number` live and retires the live one (dropped
        after `grace`), in one transaction, with the `audit` entry that says so. Refused
        (`Conflict`) if `number` is not being built by `owner` any more (cancelled meanwhile,
        or its lease was taken)."""

        async def work(session: AsyncClientSession) -> None:
            now = utcnow()
            made_live = await self._generations.update_one(
                {"_id": number, "state": GenerationState.BUILDING.value, "owner": owner},
                {
                    "$set": {"state": GenerationState.LIVE.value, "live_since": now},
                    "$unset": {"owner": "", "lease_until": ""},
                },
                session=session,
            )
            if made_live.matched_count == 0:
                raise Conflict(f"generation {number} is no longer being built here")
            # One update per document (`infra.mongo.client.update_each` says why): there is
            # one live generation.
            live = self._generations.find(
                {"_id": {"$ne": number}, "state": GenerationState.LIVE.value},
                {"_id": 1},
                session=session,
            )
            async for doc in live:
                await self._generations.update_one(
                    {"_id": doc["_id"], "state": GenerationState.LIVE.value},
                    {
                        "$set": {
                            "state": GenerationState.RETIRED.value,
                            "retired_at": now,
                            "drop_after": now + grace,
                        }
                    },
                    session=session,
                )
            if audit is not None:
                await self._audit.insert_one(audit_document(audit), session=session)

        await in_transaction(self._client, work)
        kept = await self.kept()
        assert kept is not None  # the switch made one live
        return kept

    async def cancel(self, number: int, reason: str) -> IndexGeneration:
        """Stops building generation `number` (its store is dropped; the live one is as it
        was). Refused (`Conflict`) if it is not being built."""
        ended = await self._end(
            number,
            GenerationState.BUILDING,
            GenerationState.CANCELLED,
            {"reason": reason, "retired_at": utcnow()},
        )
        if ended is None:
            raise Conflict(f"generation {number} is not being built")
        return ended

    async def drop_now(self, number: int) -> IndexGeneration:
        """Brings a retired generation's drop forward to now. Refused (`Conflict`) unless it
        is retired."""
        async with mongo_errors():
            result = await self._generations.update_one(
                {"_id": number, "state": GenerationState.RETIRED.value},
                {"$set": {"drop_after": utcnow()}},
            )
        if result.matched_count == 0:
            raise Conflict(f"generation {number} is not retired")
        found = await self.get(number)
        assert found is not None
        return found

    async def due_for_drop(self, settle: timedelta) -> list[IndexGeneration]:
        """Generations whose stores are to go: builds cancelled `settle` ago or more (every
        process has stopped writing to them), and retired ones past their grace."""
        now = utcnow()
        async with mongo_errors():
            docs = await self._generations.find(
                {
                    "$or": [
                        {
                            "state": GenerationState.CANCELLED.value,
                            "ended_at": None,
                            "retired_at": {"$lte": now - settle},
                        },
                        {"state": GenerationState.RETIRED.value, "drop_after": {"$lte": now}},
                    ]
                }
            ).to_list(None)
        return [_from_doc(doc) for doc in docs]

    async def dropped(self, number: int) -> None:
        """Records that generation `number`'s store is gone."""
        async with mongo_errors():
            await self._generations.update_one(
                {"_id": number, "state": GenerationState.RETIRED.value},
                {"$set": {"state": GenerationState.DROPPED.value, "ended_at": utcnow()}},
            )
            await self._generations.update_one(
                {"_id": number, "state": GenerationState.CANCELLED.value},
                {"$set": {"ended_at": utcnow()}},
            )

    async def _end(
        self,
        number: int,
        from_state: GenerationState,
        to_state: GenerationState,
        extra: dict[str, Any],
    ) -> IndexGeneration | None:
        async with mongo_errors():
            result = await self._generations.update_one(
                {"_id": number, "state": from_state.value},
                {
                    "$set": {"state": to_state.value, **extra},
                    "$unset": {"owner": "", "lease_until": ""},
                },
            )
        if result.matched_count == 0:
            return None
        return await self.get(number)

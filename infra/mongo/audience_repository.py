"""Audiences: tenant-local groups of users that shared and restricted items name."""

from __future__ import annotations

from collections.abc import Iterable

from pymongo import ReturnDocument

from core.errors import NotFound
from infra.mongo.client import AUDIENCES, Database, mongo_errors
from schemas.domain import Audience, utcnow


def _id(tenant_id: str, tag: str) -> str:
    return f"{tenant_id}:{tag}"


class AudienceRepository:
    """Reads and writes audiences and their members."""

    def __init__(self, db: Database) -> None:
        self._audiences = db[AUDIENCES]

    async def put(self, tenant_id: str, tag: str, description: str) -> Audience:
        """Creates the audience or changes its description; its members stay."""
        async with mongo_errors():
            doc = await self._audiences.find_one_and_update(
                {"_id": _id(tenant_id, tag)},
                {
                    "$set": {"description": description, "updated_at": utcnow()},
                    "$setOnInsert": {"tenant_id": tenant_id, "tag": tag, "members": []},
                },
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        return Audience.model_validate(doc)

    async def set_members(self, tenant_id: str, tag: str, user_ids: list[str]) -> Audience:
        """Replaces the audience's members; `NotFound` for no such audience."""
        async with mongo_errors():
            doc = await self._audiences.find_one_and_update(
                {"_id": _id(tenant_id, tag)},
                {"$set": {"members": list(dict.fromkeys(user_ids)), "updated_at": utcnow()}},
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise NotFound("audience", tag)
        return Audience.model_validate(doc)

    async def get(self, tenant_id: str, tag: str) -> Audience:
        """One audience; `NotFound` otherwise."""
        async with mongo_errors():
            doc = await self._audiences.find_one({"_id": _id(tenant_id, tag)})
        if doc is None:
            raise NotFound("audience", tag)
        return Audience.model_validate(doc)

    async def delete(self, tenant_id: str, tag: str) -> bool:
        """Deletes the audience: its members no longer read through it."""
        async with mongo_errors():
            result = await self._audiences.delete_one({"_id": _id(tenant_id, tag)})
        return result.deleted_count == 1

    async def list_all(self, tenant_id: str) -> list[Audience]:
        """The tenant's audiences, by tag."""
        async with mongo_errors():
            cursor = self._audiences.find({"tenant_id": tenant_id}).sort("tag", 1)
            return [Audience.model_validate(doc) async for doc in cursor]

    async def of_user(self, tenant_id: str, user_id: str) -> list[str]:
        """The tags of the audiences the user is a member of."""
        async with mongo_errors():
            cursor = self._audiences.find(
                {"tenant_id": tenant_id, "members": user_id}, projection={"tag": 1}
            )
            return sorted([doc["tag"] async for doc in cursor])

    async def unknown(self, tenant_id: str, tags: Iterable[str]) -> list[str]:
        """Those of the tags that are not audiences of the tenant, in the order given."""
        wanted = list(dict.fromkeys(tags))
        if not wanted:
            return []
        async with mongo_errors():
            cursor = self._audiences.find(
                {"_id": {"$in": [_id(tenant_id, tag) for tag in wanted]}}, projection={"tag": 1}
            )
            known = {doc["tag"] async for doc in cursor}
        return [tag for tag in wanted if tag not in known]

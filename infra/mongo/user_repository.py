"""The people of each tenant, by the user id their tokens and grants name."""

from __future__ import annotations

from collections.abc import Iterable

from pymongo import ReturnDocument

from infra.mongo.client import USERS, Database, mongo_errors
from schemas.domain import User, utcnow


class UserRepository:
    """Registers users and tells which ids are known."""

    def __init__(self, db: Database) -> None:
        self._users = db[USERS]

    async def register(self, tenant_id: str, user_id: str, display_name: str | None = None) -> User:
        """Adds the user if new (a name given replaces the stored one); returns it."""
        changes: dict[str, object] = {}
        if display_name is not None:
            changes["display_name"] = display_name
        async with mongo_errors():
            doc = await self._users.find_one_and_update(
                {"_id": f"{tenant_id}:{user_id}"},
                {
                    "$setOnInsert": {
                        "tenant_id": tenant_id,
                        "user_id": user_id,
                        "created_at": utcnow(),
                        **({} if display_name is not None else {"display_name": ""}),
                    },
                    **({"$set": changes} if changes else {}),
                },
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        return User.model_validate(doc)

    async def list_all(self, tenant_id: str) -> list[User]:
        """The tenant's users, by id."""
        async with mongo_errors():
            cursor = self._users.find({"tenant_id": tenant_id}).sort("user_id", 1)
            return [User.model_validate(doc) async for doc in cursor]

    async def unknown(self, tenant_id: str, user_ids: Iterable[str]) -> list[str]:
        """Those of the ids that are not users of the tenant, in the order given."""
        wanted = list(dict.fromkeys(user_ids))
        if not wanted:
            return []
        async with mongo_errors():
            cursor = self._users.find(
                {"tenant_id": tenant_id, "user_id": {"$in": wanted}}, projection={"user_id": 1}
            )
            known = {doc["user_id"] async for doc in cursor}
        return [user_id for user_id in wanted if user_id not in known]

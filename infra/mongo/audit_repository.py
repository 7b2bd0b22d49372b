"""The audit log: one record per change asked of the API, newest first per tenant."""

from __future__ import annotations

import secrets
from datetime import datetime

from infra.mongo.client import AUDIT, Database, from_mongo, mongo_errors
from schemas.domain import AuditEntry


class AuditRepository:
    """Writes and reads audit entries."""

    def __init__(self, db: Database) -> None:
        self._entries = db[AUDIT]

    async def record(self, entry: AuditEntry) -> None:
        """Stores one entry."""
        async with mongo_errors():
            await self._entries.insert_one(audit_document(entry))

    async def page(
        self, tenant_id: str, limit: int, before: datetime | None = None
    ) -> list[AuditEntry]:
        """The tenant's newest entries (older than `before`, if given)."""
        query: dict[str, object] = {"tenant_id": tenant_id}
        if before is not None:
            query["at"] = {"$lt": before}
        async with mongo_errors():
            cursor = self._entries.find(query).sort([("at", -1), ("_id", -1)]).limit(limit)
            return [AuditEntry.model_validate(from_mongo(doc)) async for doc in cursor]


def audit_document(entry: AuditEntry) -> dict[str, object]:
    """An entry as it is stored (for a writer that stores it in a transaction of its own)."""
    record = entry.model_dump(exclude={"id"})
    record["_id"] = entry.id
    return record


def new_audit_id() -> str:
    """A fresh audit entry id."""
    return f"aud_{secrets.token_hex(8)}"

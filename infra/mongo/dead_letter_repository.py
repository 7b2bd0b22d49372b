"""Messages a stage gave up on, kept in MongoDB so people can list and re-drive them.

Each is also on the stage's dead-letter topic in Kafka (for operators' tools); the copy here
is keyed by stage and content, so a message dead-lettered twice (a redelivery) is one entry.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pymongo import DESCENDING

from infra.mongo.client import DEAD_LETTERS, Database, from_mongo, mongo_errors
from schemas.domain import DeadLetterEntry, utcnow

# Bytes of a message kept (a record larger than this cannot be re-driven from here).
MAX_KEPT_BYTES = 4 * 1024 * 1024


def _fields(raw: bytes) -> dict[str, Any]:
    """The tenant, KB and document a message is about, when it says (it may not decode)."""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {
        key: str(decoded[key])
        for key in ("tenant_id", "kb_id", "document_id")
        if isinstance(decoded.get(key), str)
    }


class DeadLetterRepository:
    """Stores, lists and marks dead letters."""

    def __init__(self, db: Database) -> None:
        self._letters = db[DEAD_LETTERS]

    async def add(self, stage: str, raw: bytes, headers: dict[str, str]) -> None:
        """Keeps a message a stage gave up on, with why (again: the entry is refreshed)."""
        letter_id = "dl_" + hashlib.sha256(stage.encode() + b"\x00" + raw).hexdigest()[:24]
        fields = _fields(raw)
        record = {
            "stage": stage,
            "tenant_id": fields.get("tenant_id"),
            "kb_id": fields.get("kb_id"),
            "document_id": headers.get("document_id") or fields.get("document_id"),
            "error": headers.get("error", "")[:1000],
            "attempts": int(headers.get("attempts", "1") or 1),
            "at": utcnow(),
            "message": raw if len(raw) <= MAX_KEPT_BYTES else None,
            "size_bytes": len(raw),
            "redriven_at": None,
        }
        async with mongo_errors():
            await self._letters.update_one(
                {"_id": letter_id},
                {"$set": record, "$inc": {"count": 1}},
                upsert=True,
            )

    async def page(
        self,
        tenant_id: str,
        limit: int,
        *,
        stage: str | None = None,
        include_redriven: bool = False,
        before: datetime | None = None,
    ) -> list[DeadLetterEntry]:
        """A tenant's dead letters, newest first."""
        query: dict[str, Any] = {"tenant_id": tenant_id}
        if stage is not None:
            query["stage"] = stage
        if not include_redriven:
            query["redriven_at"] = None
        if before is not None:
            query["at"] = {"$lt": before}
        async with mongo_errors():
            cursor = self._letters.find(query, {"message": 0})
            cursor = cursor.sort([("at", DESCENDING), ("_id", DESCENDING)]).limit(limit)
            return [DeadLetterEntry.model_validate(from_mongo(doc)) async for doc in cursor]

    async def get(
        self, tenant_id: str, letter_id: str
    ) -> tuple[DeadLetterEntry, bytes | None] | None:
        """One of the tenant's dead letters and its message."""
        async with mongo_errors():
            doc = await self._letters.find_one({"_id": letter_id, "tenant_id": tenant_id})
        if doc is None:
            return None
        message = doc.pop("message", None)
        return DeadLetterEntry.model_validate(from_mongo(doc)), message

    async def mark_redriven(self, letter_id: str) -> None:
        """Notes that the letter's work was started again."""
        async with mongo_errors():
            await self._letters.update_one({"_id": letter_id}, {"$set": {"redriven_at": utcnow()}})

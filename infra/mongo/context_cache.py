"""LLM-written chunk contexts, kept in MongoDB so that unchanged content is never asked twice."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pymongo.errors import BulkWriteError

from infra.mongo.client import CONTEXTS, Database, mongo_errors
from schemas.domain import utcnow

log = logging.getLogger(__name__)

DUPLICATE_KEY = 11000


class ContextCache:
    """A MongoDB collection of contexts keyed by `infra.context.base.context_key`."""

    def __init__(self, db: Database) -> None:
        self._entries = db[CONTEXTS]

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The cached contexts of those keys that have one (one query for all of them)."""
        if not keys:
            return {}
        async with mongo_errors():
            return {
                str(doc["_id"]): str(doc["context"])
                async for doc in self._entries.find(
                    {"_id": {"$in": sorted(set(keys))}}, projection={"context": 1}
                )
            }

    async def put_many(self, contexts: Mapping[str, str]) -> None:
        """Stores contexts; best effort: a failed write is logged, never raised, because the
        contexts are already in hand and the document must not fail for a cache."""
        if not contexts:
            return
        now = utcnow()
        try:
            async with mongo_errors():
                await self._entries.insert_many(
                    [
                        {"_id": key, "context": context, "created_at": now}
                        for key, context in contexts.items()
                    ],
                    ordered=False,
                )
        except BulkWriteError as exc:
            # Entries another worker (or a replay) stored first are left as they are.
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                log.warning("could not cache %d chunk contexts: %s", len(contexts), exc)
        except Exception as exc:
            log.warning("could not cache %d chunk contexts: %s", len(contexts), exc)

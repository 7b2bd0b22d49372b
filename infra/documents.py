"""Document records and their pipeline status in MongoDB.

Every status write is conditional on the document's `generation` (which run of the pipeline
it belongs to) and on the status it expects, so a redelivered or stale event changes nothing.
"""

from __future__ import annotations

from typing import Any

from pymongo import ReturnDocument

from infra.errors import NotFound
from infra.mongo import DOCUMENTS, Database, MongoDoc, from_mongo, mongo_errors
from schemas.domain import PIPELINE_ORDER, Document, ParseStatus, utcnow


def _claimable_from(status: ParseStatus) -> list[str]:
    """A stage may take a document in the previous status or (redelivery) its own."""
    position = PIPELINE_ORDER.index(status)
    return [s.value for s in PIPELINE_ORDER[max(position - 1, 0) : position + 1]]


def _to_document(doc: MongoDoc) -> Document:
    record = from_mongo(doc)
    embedded = record.pop("embedded_batches", None) or []
    batch_size = record.pop("batch_size", None) or 0
    batch_count = record.pop("batch_count", None) or 0
    record.pop("indexed_batches", None)
    chunk_count = record.get("chunk_count") or 0
    if embedded and batch_size and batch_count:
        full = sum(1 for index in embedded if index < batch_count - 1)
        last = (chunk_count - batch_size * (batch_count - 1)) if batch_count - 1 in embedded else 0
        record["chunks_embedded"] = full * batch_size + last
    return Document.model_validate(record)


class DocumentRepository:
    """Reads and writes documents; the pipeline's status lives here."""

    def __init__(self, db: Database, parse_error_max_chars: int = 500) -> None:
        self._docs = db[DOCUMENTS]
        self._parse_error_max_chars = parse_error_max_chars

    async def insert(self, document: Document) -> None:
        """Stores a new document record."""
        record = document.model_dump(exclude={"id", "chunks_embedded"})
        record["_id"] = document.id
        async with mongo_errors():
            await self._docs.insert_one(record)

    async def get(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """One document of the tenant's KB; `NotFound` otherwise."""
        async with mongo_errors():
            doc = await self._docs.find_one(
                {"_id": document_id, "tenant_id": tenant_id, "kb_id": kb_id}
            )
        if doc is None:
            raise NotFound("document", document_id)
        return _to_document(doc)

    async def find(self, document_id: str) -> Document | None:
        """A document by id, for the pipeline (which trusts its own events' tenant)."""
        async with mongo_errors():
            doc = await self._docs.find_one({"_id": document_id})
        return None if doc is None else _to_document(doc)

    async def list_in_kb(self, tenant_id: str, kb_id: str) -> list[Document]:
        """The KB's documents, newest first."""
        async with mongo_errors():
            cursor = self._docs.find({"tenant_id": tenant_id, "kb_id": kb_id}).sort(
                "created_at", -1
            )
            return [_to_document(doc) async for doc in cursor]

    async def begin_delete(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """Marks the document as being deleted and retires its generation.

        From here on every pipeline write on it misses, so nothing in flight can bring its
        chunks back. The record stays until `remove`, so an interrupted delete can be retried.
        """
        async with mongo_errors():
            doc = await self._docs.find_one_and_update(
                {"_id": document_id, "tenant_id": tenant_id, "kb_id": kb_id},
                {
                    "$set": {"parse_status": ParseStatus.DELETING.value, "updated_at": utcnow()},
                    "$inc": {"generation": 1},
                },
                return_document=ReturnDocument.BEFORE,
            )
        if doc is None:
            raise NotFound("document", document_id)
        return _to_document(doc)

    async def remove(self, document_id: str) -> bool:
        """Deletes the record; True if it existed."""
        async with mongo_errors():
            result = await self._docs.delete_one({"_id": document_id})
        return result.deleted_count == 1

    async def claim(
        self, document_id: str, generation: int, status: ParseStatus
    ) -> Document | None:
        """Moves the document into a single-message stage's status, counting an attempt.

        Returns None if the document is gone, belongs to another generation, or is past the
        stage (a redelivered message whose work is done).
        """
        now = utcnow()
        async with mongo_errors():
            doc = await self._docs.find_one_and_update(
                {
                    "_id": document_id,
                    "generation": generation,
                    "parse_status": {"$in": _claimable_from(status)},
                },
                {
                    "$set": {
                        "parse_status": status.value,
                        "updated_at": now,
                        f"stage_started_at.{status.value}": now,
                    },
                    "$inc": {f"attempts.{status.value}": 1},
                },
                return_document=ReturnDocument.AFTER,
            )
        return None if doc is None else _to_document(doc)

    async def advance(
        self, document_id: str, generation: int, status: ParseStatus
    ) -> Document | None:
        """Enters a batch stage's status once (the first batch), then just checks currency.

        Batches of one document overlap across stages (batch 3 is embedded while batch 2 is
        indexed), so a document already in a later unfinished status is left where it is.
        Returns None if the document is gone, stale, finished or failed.
        """
        position = PIPELINE_ORDER.index(status)
        earlier = [s.value for s in PIPELINE_ORDER[:position]]
        now = utcnow()
        async with mongo_errors():
            doc = await self._docs.find_one_and_update(
                {"_id": document_id, "generation": generation, "parse_status": {"$in": earlier}},
                {
                    "$set": {
                        "parse_status": status.value,
                        "updated_at": now,
                        f"stage_started_at.{status.value}": now,
                    },
                    "$inc": {f"attempts.{status.value}": 1},
                },
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                unfinished = [s.value for s in PIPELINE_ORDER[position:-1]]
                doc = await self._docs.find_one(
                    {
                        "_id": document_id,
                        "generation": generation,
                        "parse_status": {"$in": unfinished},
                    }
                )
        return None if doc is None else _to_document(doc)

    async def record_chunking(
        self,
        document_id: str,
        generation: int,
        *,
        chunk_count: int,
        text_char_count: int,
        batch_count: int,
        batch_size: int,
    ) -> bool:
        """Stores the chunking outcome; False if the document is gone or stale."""
        return await self._update_current(
            document_id,
            generation,
            {
                "$set": {
                    "chunk_count": chunk_count,
                    "text_char_count": text_char_count,
                    "batch_count": batch_count,
                    "batch_size": batch_size,
                    "embedded_batches": [],
                    "indexed_batches": [],
                    "updated_at": utcnow(),
                }
            },
        )

    async def record_batch_embedded(
        self, document_id: str, generation: int, batch_index: int
    ) -> bool:
        """Marks one batch embedded (idempotent); False if the document is gone or stale."""
        return await self._update_current(
            document_id,
            generation,
            {
                "$addToSet": {"embedded_batches": batch_index},
                "$set": {"updated_at": utcnow()},
            },
        )

    async def record_batch_indexed(
        self, document_id: str, generation: int, batch_index: int
    ) -> tuple[int, int] | None:
        """Marks one batch indexed (idempotent): (batches indexed, batch count), or None."""
        async with mongo_errors():
            doc = await self._docs.find_one_and_update(
                {"_id": document_id, "generation": generation},
                {
                    "$addToSet": {"indexed_batches": batch_index},
                    "$set": {"updated_at": utcnow()},
                },
                return_document=ReturnDocument.AFTER,
                projection={"indexed_batches": 1, "batch_count": 1},
            )
        if doc is None:
            return None
        return len(doc.get("indexed_batches") or []), int(doc.get("batch_count") or 0)

    async def mark_indexed(self, document_id: str, generation: int) -> tuple[Document, int] | None:
        """Finishes the document.

        Returns the finished document and the chunk count it had contributed to its KB before
        (0 on a first indexing) to the one caller that made the change; None to everyone else.
        """
        current = await self.find(document_id)
        if current is None or current.generation != generation or current.chunk_count is None:
            return None
        now = utcnow()
        async with mongo_errors():
            before = await self._docs.find_one_and_update(
                {
                    "_id": document_id,
                    "generation": generation,
                    "parse_status": {"$nin": [ParseStatus.INDEXED.value, ParseStatus.FAILED.value]},
                },
                {
                    "$set": {
                        "parse_status": ParseStatus.INDEXED.value,
                        "parse_error": None,
                        "updated_at": now,
                        f"stage_started_at.{ParseStatus.INDEXED.value}": now,
                        "indexed_chunk_count": current.chunk_count,
                    }
                },
                return_document=ReturnDocument.BEFORE,
            )
        if before is None:
            return None
        previous = int(before.get("indexed_chunk_count") or 0)
        finished = current.model_copy(
            update={"parse_status": ParseStatus.INDEXED, "parse_error": None, "updated_at": now}
        )
        return finished, previous

    async def mark_failed(self, document_id: str, generation: int, reason: str) -> bool:
        """Marks the document failed with a reason the user can act on."""
        limit = self._parse_error_max_chars
        text = reason if len(reason) <= limit else reason[: limit - 1] + "…"
        return await self._update_current(
            document_id,
            generation,
            {
                "$set": {
                    "parse_status": ParseStatus.FAILED.value,
                    "parse_error": text,
                    "updated_at": utcnow(),
                    f"stage_started_at.{ParseStatus.FAILED.value}": utcnow(),
                }
            },
        )

    async def _update_current(
        self, document_id: str, generation: int, update: dict[str, Any]
    ) -> bool:
        """Applies `update` to the document if it still runs this generation, unfinished."""
        async with mongo_errors():
            result = await self._docs.update_one(
                {
                    "_id": document_id,
                    "generation": generation,
                    "parse_status": {"$ne": ParseStatus.INDEXED.value},
                },
                update,
            )
        return result.matched_count == 1

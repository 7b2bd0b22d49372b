"""Document records and their pipeline status in MongoDB.

Every status write is conditional on the document's `generation` (which run of the pipeline
it belongs to) and on the status it expects, so a redelivered or stale event changes nothing.
"""

from __future__ import annotations

from typing import Any

from pymongo import ReturnDocument

from infra.errors import NotFound
from infra.mongo import DOCUMENTS, Database, MongoDoc, from_mongo, mongo_errors
from schemas.domain import PIPELINE_ORDER, ChunkingProgress, Document, ParseStatus, utcnow


def _to_document(doc: MongoDoc) -> Document:
    record = from_mongo(doc)
    embedded = record.pop("embedded_batches", None) or {}
    for internal in ("indexed_batches", "batch_count", "chunker"):
        record.pop(internal, None)
    record["chunks_embedded"] = sum(int(size) for size in embedded.values())
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

    async def advance(
        self, document_id: str, generation: int, status: ParseStatus
    ) -> Document | None:
        """Enters a batch stage's status once (the first batch), then just checks currency.

        Batches of one document overlap across stages (batch 3 is embedded while batch 2 is
        indexed), so a document already in a later unfinished status is left where it is.
        Returns None if the document is gone, stale, finished or failed.
        """
        position = PIPELINE_ORDER.index(status)
        earlier = {s.value for s in PIPELINE_ORDER[:position]}
        unfinished = {s.value for s in PIPELINE_ORDER[position:-1]}
        async with mongo_errors():
            doc = await self._docs.find_one({"_id": document_id, "generation": generation})
        if doc is None or doc.get("parse_status") not in earlier | unfinished:
            return None
        if doc["parse_status"] in unfinished:
            return _to_document(doc)
        now = utcnow()
        async with mongo_errors():
            moved = await self._docs.find_one_and_update(
                {
                    "_id": document_id,
                    "generation": generation,
                    "parse_status": {"$in": sorted(earlier)},
                },
                {
                    "$set": {
                        "parse_status": status.value,
                        "updated_at": now,
                        f"stage_started_at.{status.value}": now,
                    },
                    # Counted once per stage entry; the runner adds one per retry.
                    "$inc": {f"attempts.{status.value}": 1},
                },
                return_document=ReturnDocument.AFTER,
            )
            if moved is None:
                # Another message moved it first; it is current if it is now at or past here.
                moved = await self._docs.find_one(
                    {
                        "_id": document_id,
                        "generation": generation,
                        "parse_status": {"$in": sorted(unfinished)},
                    }
                )
        return None if moved is None else _to_document(moved)

    async def chunking_progress(self, document_id: str, generation: int) -> ChunkingProgress | None:
        """How far the chunk stage got; None if the document is gone or stale."""
        async with mongo_errors():
            doc = await self._docs.find_one(
                {"_id": document_id, "generation": generation}, projection={"chunker": 1}
            )
        if doc is None:
            return None
        saved = doc.get("chunker") or {}
        return ChunkingProgress(
            next_part=int(saved.get("next_part", 0)),
            next_batch=int(saved.get("next_batch", 0)),
            state=dict(saved.get("state") or {}),
        )

    async def save_chunking_progress(
        self, document_id: str, generation: int, done_part: int, progress: ChunkingProgress
    ) -> bool:
        """Records that part `done_part` is chunked, only if it was the next one."""
        expected: dict[str, Any] | int = {"$in": [None, 0]} if done_part == 0 else done_part
        async with mongo_errors():
            result = await self._docs.update_one(
                {"_id": document_id, "generation": generation, "chunker.next_part": expected},
                {
                    "$set": {
                        "chunker": {
                            "next_part": progress.next_part,
                            "next_batch": progress.next_batch,
                            "state": progress.state,
                        },
                        "updated_at": utcnow(),
                    }
                },
            )
        return result.matched_count == 1

    async def record_chunking(
        self,
        document_id: str,
        generation: int,
        *,
        chunk_count: int,
        text_char_count: int,
        batch_count: int,
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
                    "updated_at": utcnow(),
                }
            },
        )

    async def record_batch_embedded(
        self, document_id: str, generation: int, batch_index: int, size: int
    ) -> bool:
        """Marks one batch of `size` chunks embedded (idempotent); False if gone or stale."""
        return await self._update_current(
            document_id,
            generation,
            {"$set": {f"embedded_batches.{batch_index}": size, "updated_at": utcnow()}},
        )

    async def record_batch_indexed(
        self, document_id: str, generation: int, batch_index: int, size: int
    ) -> tuple[int, int | None] | None:
        """Marks one batch indexed (idempotent).

        Returns (batches indexed, batch count once the last part is chunked), or None if the
        document is gone or stale.
        """
        async with mongo_errors():
            doc = await self._docs.find_one_and_update(
                {"_id": document_id, "generation": generation},
                {"$set": {f"indexed_batches.{batch_index}": size, "updated_at": utcnow()}},
                return_document=ReturnDocument.AFTER,
                projection={"indexed_batches": 1, "batch_count": 1},
            )
        if doc is None:
            return None
        count = doc.get("batch_count")
        return len(doc.get("indexed_batches") or {}), None if count is None else int(count)

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

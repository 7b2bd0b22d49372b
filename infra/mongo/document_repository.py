"""Document records and their pipeline status in MongoDB.

Every status write is conditional on the document's `generation` (which run of the pipeline
it belongs to) and on the status it expects, so a redelivered or stale event changes nothing.
Changes that also touch the KB's counts or the version line are in `infra.mongo.lifecycle`.

The writes the stages make on every message (entering a status, recording a batch) and the
index stage's second read of a document go through micro-batches (`core.coalescing`): messages
a process works at the same moment share one round trip, an unordered bulk write or one read
of all their documents, where each alone took its own.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument, UpdateOne

from core.coalescing import Coalescer
from core.errors import InvalidRequest, NotFound
from core.governance import Governance
from infra.mongo.client import (
    DOCUMENTS,
    Database,
    MongoDoc,
    from_mongo,
    mongo_errors,
    update_each,
    with_ids,
)
from schemas.domain import (
    PIPELINE_ORDER,
    ChunkingProgress,
    Document,
    ItemKind,
    ParseStatus,
    utcnow,
)

# Statuses a document is in while the pipeline works on it.
IN_PROGRESS = tuple(s.value for s in PIPELINE_ORDER[:-1])
# Before any document's progress.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Progress fields of one run of the pipeline, cleared when a new run starts.
RUN_FIELDS = ("chunker", "embedded_batches", "indexed_batches", "batch_count")


# Stage messages whose status writes one round trip takes at most.
MAX_BATCH = 64


# Set on a document the reconciler failed: the generation whose run the API process's sweep is
# to take out of search (it may have been published; the reconciler cannot reach the store).
WITHDRAW = "withdraw_generation"


def to_document(doc: MongoDoc) -> Document:
    """A stored record as a `Document` (its bookkeeping fields folded into progress)."""
    record = from_mongo(doc)
    embedded = record.pop("embedded_batches", None) or {}
    for internal in ("indexed_batches", WITHDRAW):
        record.pop(internal, None)
    record["chunks_embedded"] = sum(int(size) for size in embedded.values())
    return Document.model_validate(record)


@dataclass(frozen=True)
class _Advance:
    """A stage message entering its document's status (`DocumentRepository.advance`)."""

    document_id: str
    generation: int
    status: ParseStatus
    first: bool
    # Fields the move stores too (`Event.stored_on_entry`).
    stores: tuple[tuple[str, str], ...] = ()

    def behind(self, doc: MongoDoc | None) -> bool:
        """Whether the document runs this generation, still in an earlier status."""
        return (
            doc is not None
            and doc.get("generation") == self.generation
            and doc.get("parse_status") in _before(self.status)
        )

    def entered(self, doc: MongoDoc | None) -> Document | None:
        """The document, if it runs this generation in this status or a later unfinished one."""
        if (
            doc is None
            or doc.get("generation") != self.generation
            or doc.get("parse_status") not in _from(self.status)
        ):
            return None
        return to_document(doc)

    def move(self, now: datetime) -> UpdateOne:
        """Moves the document to the status if it is still in an earlier one: only one message
        moves it, whichever does."""
        return UpdateOne(
            {
                "_id": self.document_id,
                "generation": self.generation,
                "parse_status": {"$in": sorted(_before(self.status))},
            },
            {
                "$set": {
                    **dict(self.stores),
                    "parse_status": self.status.value,
                    "updated_at": now,
                    "progressed_at": now,
                    f"stage_started_at.{self.status.value}": now,
                },
                # Counted once per stage entry; the runner adds one per retry.
                "$inc": {f"attempts.{self.status.value}": 1},
            },
        )


def _before(status: ParseStatus) -> set[str]:
    """The statuses a document goes through before `status`."""
    return {s.value for s in PIPELINE_ORDER[: PIPELINE_ORDER.index(status)]}


def _from(status: ParseStatus) -> set[str]:
    """`status` and the unfinished ones after it."""
    return {s.value for s in PIPELINE_ORDER[PIPELINE_ORDER.index(status) : -1]}


@dataclass(frozen=True)
class _Write:
    """A conditional update of one document, and a query it matches once the update is in
    (which tells, when some of a batch matched nothing, which ones did)."""

    query: MongoDoc
    update: MongoDoc
    applied: MongoDoc


@dataclass
class DocumentPage:
    """One page of a document listing."""

    items: list[Document]
    next_cursor: str | None


def _encode_cursor(document: Document) -> str:
    raw = json.dumps([document.created_at.isoformat(), document.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, document_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(created), str(document_id)
    except (ValueError, TypeError) as exc:
        raise InvalidRequest("invalid cursor") from exc


def _newest(documents: list[Document], key: Callable[[Document], Any]) -> Document | None:
    live = [d for d in documents if d.parse_status is not ParseStatus.DELETING]
    return max(live, key=key) if live else None


class DocumentRepository:
    """Reads and writes documents; the pipeline's status lives here."""

    def __init__(self, db: Database, parse_error_max_chars: int = 500) -> None:
        self._docs = db[DOCUMENTS]
        self._parse_error_max_chars = parse_error_max_chars
        self._advances: Coalescer[_Advance, Document | None] = Coalescer(
            self._advance_all, max_batch=MAX_BATCH
        )
        self._writes: Coalescer[_Write, bool] = Coalescer(self._write_all, max_batch=MAX_BATCH)
        self._enters: Coalescer[_Advance, bool] = Coalescer(self._enter_all, max_batch=MAX_BATCH)

    async def get(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """One document of the tenant's KB; `NotFound` otherwise."""
        async with mongo_errors():
            doc = await self._docs.find_one(
                {"_id": document_id, "tenant_id": tenant_id, "kb_id": kb_id}
            )
        if doc is None:
            raise NotFound("document", document_id)
        return to_document(doc)

    async def existing_ids(self, tenant_id: str, kb_id: str, ids: set[str]) -> set[str]:
        """Those of the ids that are documents of the tenant's KB."""
        if not ids:
            return set()
        async with mongo_errors():
            cursor = self._docs.find(
                {"_id": {"$in": sorted(ids)}, "tenant_id": tenant_id, "kb_id": kb_id},
                projection={"_id": 1},
            )
            return {str(doc["_id"]) async for doc in cursor}

    async def find(self, document_id: str) -> Document | None:
        """A document by id, for the pipeline (which trusts its own events' tenant)."""
        async with mongo_errors():
            doc = await self._docs.find_one({"_id": document_id})
        return None if doc is None else to_document(doc)

    async def list_page(
        self,
        tenant_id: str,
        kb_id: str,
        *,
        status: ParseStatus | None = None,
        stalled_before: datetime | None = None,
        readers: Sequence[str] | None = None,
        external_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> DocumentPage:
        """The KB's documents, newest first, a page at a time.

        `stalled_before` keeps only documents in progress that have not moved since then;
        `readers` only those one of these principals may read.
        """
        query: dict[str, Any] = {"tenant_id": tenant_id, "kb_id": kb_id}
        if readers is not None:
            query["readers"] = {"$in": list(readers)}
        if status is not None:
            query["parse_status"] = status.value
        if external_id is not None:
            query["external_id"] = external_id
        if stalled_before is not None:
            query["parse_status"] = {"$in": list(IN_PROGRESS)}
            query["updated_at"] = {"$lt": stalled_before}
        if cursor:
            created, document_id = _decode_cursor(cursor)
            query["$or"] = [
                {"created_at": {"$lt": created}},
                {"created_at": created, "_id": {"$lt": document_id}},
            ]
        async with mongo_errors():
            found = self._docs.find(query).sort([("created_at", DESCENDING), ("_id", DESCENDING)])
            items = [to_document(doc) async for doc in found.limit(limit + 1)]
        more = len(items) > limit
        items = items[:limit]
        return DocumentPage(items, _encode_cursor(items[-1]) if more and items else None)

    async def versions_of_item(self, tenant_id: str, knowledge_item_id: str) -> list[Document]:
        """Every version of one knowledge item (none being deleted), newest first."""
        async with mongo_errors():
            cursor = self._docs.find(
                {"tenant_id": tenant_id, "knowledge_item_id": knowledge_item_id}
            ).sort("version", DESCENDING)
            found = [to_document(doc) async for doc in cursor]
        return [d for d in found if d.parse_status is not ParseStatus.DELETING]

    async def set_governance(
        self, tenant_id: str, knowledge_item_id: str, governance: Governance
    ) -> None:
        """Gives every version of the item this ownership and visibility (and its readers)."""
        await update_each(
            self._docs,
            {"tenant_id": tenant_id, "knowledge_item_id": knowledge_item_id},
            {"$set": {"governance": governance.model_dump(), "readers": governance.readers()}},
        )

    async def without_readers(self, limit: int) -> list[Document]:
        """Documents stored before items had readers (to be given the default ones)."""
        async with mongo_errors():
            cursor = self._docs.find({"readers": {"$exists": False}}).limit(limit)
            return [to_document(doc) async for doc in cursor]

    async def wiki_pages(self, tenant_id: str, topic: str | None = None) -> list[Document]:
        """The tenant's wiki pages (of one topic, if given), every version, newest first."""
        query: dict[str, Any] = {"tenant_id": tenant_id, "kind": ItemKind.WIKI.value}
        if topic is not None:
            query["topic"] = topic
        async with mongo_errors():
            cursor = self._docs.find(query).sort([("topic", 1), ("version", DESCENDING)])
            found = [to_document(doc) async for doc in cursor]
        return [d for d in found if d.parse_status is not ParseStatus.DELETING]

    async def count_stalled(self, stalled_before: datetime) -> int:
        """Documents in progress, in any KB, that have not moved since `stalled_before`."""
        async with mongo_errors():
            counts = await asyncio.gather(
                *(
                    self._docs.count_documents(
                        {"parse_status": status, "updated_at": {"$lt": stalled_before}}
                    )
                    for status in IN_PROGRESS
                )
            )
        return sum(counts)

    async def in_progress(self, updated_before: datetime, limit: int) -> list[Document]:
        """Documents in progress, in any KB, that have not moved since `updated_before`
        (longest unmoved first)."""
        found = await self._each_in_progress(
            {"updated_at": {"$lt": updated_before}}, None, ASCENDING, limit
        )
        return [to_document(doc) for doc in found]

    async def latest_progress(self) -> list[tuple[str, datetime]]:
        """The two documents a stage moved on last (entered a stage, or ended them indexed or
        failed), with when, latest first: enough to tell, for any one document, when another
        one last moved."""
        async with mongo_errors():
            cursor = (
                self._docs.find({"progressed_at": {"$gt": _EPOCH}}, {"progressed_at": 1})
                .sort("progressed_at", DESCENDING)
                .limit(2)
            )
            return [
                (str(doc["_id"]), doc["progressed_at"].replace(tzinfo=UTC)) async for doc in cursor
            ]

    async def last_progress(self) -> datetime | None:
        """When a document in progress last moved (None: nothing in progress)."""
        found = await self._each_in_progress({}, {"updated_at": 1}, DESCENDING, 1)
        return found[0]["updated_at"].replace(tzinfo=UTC) if found else None

    async def _each_in_progress(
        self, query: MongoDoc, projection: MongoDoc | None, order: int, limit: int
    ) -> list[MongoDoc]:
        """The first `limit` documents in progress matching `query`, by `updated_at` in
        `order`: one query per status, each an index range of `unmoved_by_status`, merged here.
        (One query with the statuses `$in` is one index scan on MongoDB, but the local server
        scans the whole collection for it, on every reconciler pass.)"""

        async def of_status(status: str) -> list[MongoDoc]:
            cursor = (
                self._docs.find({"parse_status": status, **query}, projection)
                .sort("updated_at", order)
                .limit(limit)
            )
            return [doc async for doc in cursor]

        async with mongo_errors():
            found = await asyncio.gather(*(of_status(status) for status in IN_PROGRESS))
        merged = sorted(
            (doc for docs in found for doc in docs),
            key=lambda doc: doc["updated_at"],
            reverse=order == DESCENDING,
        )
        return merged[:limit]

    async def mark_synced(self, document_ids: Sequence[str], source: str, run: str) -> None:
        """Tags documents as contained in a sync run of their source."""
        if not document_ids:
            return
        await update_each(
            self._docs,
            {"_id": {"$in": list(document_ids)}},
            {"$set": {"source": source, "sync_run": run}},
        )

    async def not_in_run(self, tenant_id: str, kb_id: str, source: str, run: str) -> list[Document]:
        """The KB's documents of a source that a sync run did not contain (none being
        deleted). Equality on the indexed fields only; the rest is sorted out here (the local
        server scans the collection for a negation)."""
        async with mongo_errors():
            cursor = self._docs.find({"tenant_id": tenant_id, "kb_id": kb_id, "source": source})
            return [
                to_document(doc)
                async for doc in cursor
                if doc.get("sync_run") != run
                and doc.get("parse_status") != ParseStatus.DELETING.value
            ]

    async def retired(self, before: datetime, limit: int) -> list[Document]:
        """Documents being deleted since before `before` (their delete is to be finished)."""
        async with mongo_errors():
            cursor = self._docs.find(
                {"parse_status": ParseStatus.DELETING.value, "updated_at": {"$lt": before}}
            ).limit(limit)
            return [to_document(doc) async for doc in cursor]

    async def lines_in_run(self, tenant_id: str, kb_id: str, source: str, run: str) -> set[str]:
        """The version lines (source keys) a sync run of a source holds."""
        async with mongo_errors():
            keys = await self._docs.distinct(
                "source_key",
                {"tenant_id": tenant_id, "kb_id": kb_id, "source": source, "sync_run": run},
            )
        return {str(key) for key in keys}

    async def touch(self, document_id: str, generation: int) -> None:
        """Notes that a stage is still working on the document (so it is not stalled)."""
        await self._update_current(document_id, generation, {"$set": {"updated_at": utcnow()}})

    async def find_identical(self, kb_id: str, sha256: str) -> Document | None:
        """The newest document of the KB with exactly these bytes (not one being deleted)."""
        async with mongo_errors():
            found = [
                to_document(doc)
                async for doc in self._docs.find({"kb_id": kb_id, "sha256": sha256})
            ]
        return _newest(found, key=lambda d: d.created_at)

    async def latest_of_source(self, kb_id: str, source_key: str) -> Document | None:
        """The newest version of a source in the KB (not one being deleted)."""
        return (await self.latest_of_sources(kb_id, [source_key])).get(source_key)

    async def latest_of_sources(self, kb_id: str, source_keys: list[str]) -> dict[str, Document]:
        """The newest version of each of these sources in the KB, by source key."""
        if not source_keys:
            return {}
        latest: dict[str, Document] = {}
        # Equality on the indexed fields only; the rest is sorted out here (cheaper on servers
        # whose planners do not combine an index with a negation).
        query: dict[str, Any] = {"kb_id": kb_id, "source_key": source_keys[0]}
        if len(set(source_keys)) > 1:
            query["source_key"] = {"$in": list(set(source_keys))}
        async with mongo_errors():
            async for doc in self._docs.find(query):
                document = to_document(doc)
                if document.parse_status is ParseStatus.DELETING:
                    continue
                known = latest.get(document.source_key)
                if known is None or known.version < document.version:
                    latest[document.source_key] = document
        return latest

    async def count_retry(self, document_id: str, generation: int, status: ParseStatus) -> None:
        """Counts one more attempt at a stage (a retry after a transient failure)."""
        await self._update_current(
            document_id, generation, {"$inc": {f"attempts.{status.value}": 1}}
        )

    async def begin_delete(self, tenant_id: str, kb_id: str, document_id: str) -> Document:
        """Marks the document as being deleted and retires its generation.

        From here on every pipeline write on it misses, so nothing in flight can bring its
        chunks back. The record stays until it is removed, so an interrupted delete can be
        retried.
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
        return to_document(doc)

    async def begin_delete_kb(self, tenant_id: str, kb_id: str) -> list[Document]:
        """Retires every document of a KB (as `begin_delete`); returns them. Those a delete
        cut short retired already are left as they are, so deleting again gets on with it."""
        await update_each(
            self._docs,
            {
                "tenant_id": tenant_id,
                "kb_id": kb_id,
                "parse_status": {"$ne": ParseStatus.DELETING.value},
            },
            {
                "$set": {"parse_status": ParseStatus.DELETING.value, "updated_at": utcnow()},
                "$inc": {"generation": 1},
            },
        )
        async with mongo_errors():
            cursor = self._docs.find({"tenant_id": tenant_id, "kb_id": kb_id})
            return [to_document(doc) async for doc in cursor]

    async def advance(
        self,
        document_id: str,
        generation: int,
        status: ParseStatus,
        *,
        first: bool = True,
        stores: Mapping[str, str] | None = None,
    ) -> Document | None:
        """Enters a batch stage's status once (the first batch), then just checks currency.

        Batches of one document overlap across stages (batch 3 is embedded while batch 2 is
        indexed), so a document already in a later unfinished status is left where it is.
        Returns None if the document is gone, stale, finished or failed.

        Two round trips either way it is likely to go, shared with the other messages
        entering at the same moment: a message that `first` enters the stage tries the move,
        then reads where the document is; any other reads first and moves it only if it is
        still in an earlier status (its batch overtook the first). (No find-and-modify on
        this path: see `infra.mongo.client`.)
        """
        (document,) = await self._advances.submit(
            [_Advance(document_id, generation, status, first, tuple((stores or {}).items()))]
        )
        return document

    async def enter(
        self,
        document_id: str,
        generation: int,
        status: ParseStatus,
        *,
        stores: Mapping[str, str] | None = None,
    ) -> bool:
        """Moves the document into a stage's status if this run is still in an earlier one
        (storing `stores` too), reading nothing back: one write, shared with the other
        messages entering at the same moment. True if this message moved it (the run is
        current and starts the stage now); False if it did not, or if it cannot tell (another
        move of the shared write missed): the caller then asks `advance`, which finds where
        the document is."""
        (moved,) = await self._enters.submit(
            [_Advance(document_id, generation, status, True, tuple((stores or {}).items()))]
        )
        return moved

    async def _enter_all(self, enters: list[_Advance]) -> list[bool]:
        now = utcnow()
        async with mongo_errors():
            result = await self._docs.bulk_write(
                [enter.move(now) for enter in enters], ordered=False
            )
        return [result.matched_count == len(enters)] * len(enters)

    async def _advance_all(self, advances: list[_Advance]) -> list[Document | None]:
        """`advance` for each message of a batch: one bulk write of the moves, one read."""
        now = utcnow()
        async with mongo_errors():
            entering = [advance.move(now) for advance in advances if advance.first]
            if entering:
                await self._docs.bulk_write(entering, ordered=False)
            found = await self._by_id([advance.document_id for advance in advances])
            behind = [a for a in advances if not a.first and a.behind(found.get(a.document_id))]
            if behind:
                await self._docs.bulk_write([a.move(now) for a in behind], ordered=False)
                found.update(await self._by_id([advance.document_id for advance in behind]))
        return [advance.entered(found.get(advance.document_id)) for advance in advances]

    async def _by_id(self, document_ids: list[str]) -> dict[str, MongoDoc]:
        """The stored records of these documents, by id (one read)."""
        return {str(doc["_id"]): doc async for doc in self._docs.find(with_ids(document_ids))}

    async def save_chunking_progress(
        self, document_id: str, generation: int, done_part: int, progress: ChunkingProgress
    ) -> bool:
        """Records that part `done_part` is chunked, only if it was the next one."""
        expected: dict[str, Any] | int = {"$in": [None, 0]} if done_part == 0 else done_part
        current = {"_id": document_id, "generation": generation}
        return await self._write(
            {**current, "chunker.next_part": expected},
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
            applied={**current, "chunker.next_part": progress.next_part},
        )

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
        return await self._write(
            _unfinished(document_id, generation),
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
        return await self._write(
            _unfinished(document_id, generation),
            {"$set": {f"embedded_batches.{batch_index}": size, "updated_at": utcnow()}},
        )

    async def record_batch_indexed(
        self,
        document_id: str,
        generation: int,
        batch_index: int,
        size: int,
        *,
        batch_count: int | None = None,
    ) -> tuple[int, int | None] | None:
        """Marks one batch indexed (idempotent).

        Returns (batches indexed, batch count once the last part is chunked), or None if the
        document is gone or stale. A run known to make a single batch (`batch_count` 1) needs
        no second read: this batch is all of it.
        """
        current = {"_id": document_id, "generation": generation}
        marked = await self._write(
            current, {"$set": {f"indexed_batches.{batch_index}": size, "updated_at": utcnow()}}
        )
        if batch_count == 1:
            return (1, 1) if marked else None
        # Two batches finishing together may both see the last one counted: finishing a
        # document is idempotent (`DocumentLifecycle.finish`).
        async with mongo_errors():
            doc = await self._docs.find_one(
                current, projection={"indexed_batches": 1, "batch_count": 1}
            )
        if doc is None:
            return None
        count = doc.get("batch_count")
        return len(doc.get("indexed_batches") or {}), None if count is None else int(count)

    async def _write(
        self, query: MongoDoc, update: MongoDoc, *, applied: MongoDoc | None = None
    ) -> bool:
        """Applies `update` to the document `query` matches, in a bulk write shared with the
        stages' other writes of the moment; whether it matched. `applied`: a query the
        document matches once the update is in, if it is not `query` itself."""
        (matched,) = await self._writes.submit([_Write(query, update, applied or query)])
        return matched

    async def _write_all(self, writes: list[_Write]) -> list[bool]:
        async with mongo_errors():
            result = await self._docs.bulk_write(
                [UpdateOne(write.query, write.update) for write in writes], ordered=False
            )
            if result.matched_count == len(writes):
                return [True] * len(writes)
            if len(writes) == 1:
                return [False]
            # Some matched nothing (a document deleted or started again): which ones, from
            # what each write leaves behind.
            return [
                await self._docs.find_one(write.applied, projection={"_id": 1}) is not None
                for write in writes
            ]

    async def mark_failed(
        self, document_id: str, generation: int, reason: str, *, by_stage: bool = True
    ) -> bool:
        """Marks the document failed with a reason the user can act on. A stage's verdict is
        progress (`progressed_at`); the reconciler giving up on a stuck document is not, and
        leaves the run for the API process to take out of search (`runs_to_withdraw`): the
        index stage may have published it before the document stopped moving."""
        limit = self._parse_error_max_chars
        text = reason if len(reason) <= limit else reason[: limit - 1] + "…"
        now = utcnow()
        fields: dict[str, Any] = {
            "parse_status": ParseStatus.FAILED.value,
            "parse_error": text,
            "updated_at": now,
            f"stage_started_at.{ParseStatus.FAILED.value}": now,
        }
        if by_stage:
            fields["progressed_at"] = now
        else:
            fields[WITHDRAW] = generation
        return await self._update_current(document_id, generation, {"$set": fields})

    async def runs_to_withdraw(self, limit: int) -> list[tuple[Document, int]]:
        """Documents the reconciler failed, each with the generation whose run is to be taken
        out of search (the document may have moved on to a newer one since)."""
        async with mongo_errors():
            cursor = self._docs.find({WITHDRAW: {"$gt": 0}}).limit(limit)
            return [(to_document(doc), int(doc[WITHDRAW])) async for doc in cursor]

    async def withdrawn(self, document_id: str, generation: int) -> None:
        """Notes that the run of `generation` is out of search."""
        async with mongo_errors():
            await self._docs.update_one(
                {"_id": document_id, WITHDRAW: generation}, {"$unset": {WITHDRAW: ""}}
            )

    async def _update_current(
        self, document_id: str, generation: int, update: dict[str, Any]
    ) -> bool:
        """Applies `update` to the document if it still runs this generation, unfinished."""
        async with mongo_errors():
            result = await self._docs.update_one(_unfinished(document_id, generation), update)
        return result.matched_count == 1


def _unfinished(document_id: str, generation: int) -> MongoDoc:
    """The document, if it still runs this generation and is not indexed yet."""
    return {
        "_id": document_id,
        "generation": generation,
        "parse_status": {"$ne": ParseStatus.INDEXED.value},
    }

"""Changes that span a document, its version line and the events that start its pipeline (which
version goes live is the rule `schemas.rules.goes_live`).

Each is one MongoDB transaction (the events go to the outbox, `infra.mongo.outbox`, in it), so a
crash or a replayed event can never leave two versions of one source both marked live, or an
accepted document without its event. Within a transaction a write and then a read of the same
record are atomic, so no find-and-modify is needed (see `infra.mongo.client`).

No transaction writes a record that other documents' changes write too, such as their KB's:
a process killed in the middle of a transaction leaves it open until the server reaps it (a
minute, MongoDB's `transactionLifetimeLimitSeconds`), and every transaction that writes a record
it wrote waits until then. So a KB's document and chunk counts are not kept on the KB: they are
counted from its documents when shown (`KnowledgeBaseRepository.counted`), and the KB's revision
is raised by a write of its own: after the transaction has committed (raised again by a replay,
which costs a cached answer at most), or before it when nothing would replay it (a removal).

The index stage's reads of live versions and its raises of KB revisions are shared by the
messages it works at the same moment (`core.coalescing`): one read of their sources, one raise
of each of their KBs (which moves each KB past every revision its callers published under).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pymongo import AsyncMongoClient, ReturnDocument, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession

from core.coalescing import Coalescer
from core.errors import NotFound
from infra.mongo.client import (
    DOCUMENTS,
    KNOWLEDGE_BASES,
    SOURCES,
    Database,
    MongoDoc,
    in_transaction,
    mongo_errors,
    with_ids,
)
from infra.mongo.document_repository import RUN_FIELDS, to_document
from infra.mongo.outbox import Outbox, Pending
from schemas.domain import Document, ParseStatus, utcnow
from schemas.events import DocumentUploaded
from schemas.rules import goes_live

T = TypeVar("T")
# The revision each KB a change touched now has: told to `services.freshness_service` by the
# caller, so answers cached for older revisions are no longer served.
KbRevisions = dict[str, int]


def _source_id(kb_id: str, source_key: str) -> str:
    return f"{kb_id}\x00{source_key}"


@dataclass
class Finished:
    """A version that finished indexing, and the older versions it retired. (The KB's revision
    moved on before, when the version was published: `workers.index.handler`.)"""

    document: Document
    retired: list[Document] = field(default_factory=list)


@dataclass
class Started:
    """Events queued for new documents (to send at once; the relay sends what is left), and
    the documents as stored."""

    events: list[Pending]
    documents: list[Document]


@dataclass
class Removed:
    """A document whose record is gone, and its KB's new revision."""

    document: Document
    revisions: KbRevisions


class _Undecided(Exception):
    """The runs cannot be finished as they were read: the transaction rolls back."""


@dataclass
class Superseded:
    """A version that finished after a newer one of the same source went live."""

    document: Document


class DocumentLifecycle:
    """Creates, finishes and removes documents, keeping KB counts and versions consistent."""

    def __init__(self, client: AsyncMongoClient[MongoDoc], db: Database, outbox: Outbox) -> None:
        self._client = client
        self._outbox = outbox
        self._docs = db[DOCUMENTS]
        self._kbs = db[KNOWLEDGE_BASES]
        self._sources = db[SOURCES]
        self._live_reads: Coalescer[str, int] = Coalescer(self._live_versions, max_batch=64)
        self._touches: Coalescer[str, int | None] = Coalescer(self._touch_all, max_batch=64)
        self._finishes: Coalescer[tuple[str, int], Finished | Superseded | None] = Coalescer(
            self._finish_all, max_batch=64
        )
        self._finishes_as_read: Coalescer[Document, Finished | None] = Coalescer(
            self._finish_all_as_read, max_batch=64
        )

    async def create(
        self,
        documents: Sequence[Document],
        carried: Mapping[str, bytes] | None = None,
        *,
        number: bool = False,
    ) -> Started:
        """Stores new documents of one KB and queues their pipeline events (each carrying its
        document's original if `carried` has it: a small one), in one transaction.

        With `number`, each document first gets the next version of its line (a line named
        twice gets two numbers, one after the other; 1 for a new line), in the same
        transaction: two round trips however many lines there are. The documents as stored
        are returned. Nothing search shows changes until a version is indexed, so no KB's
        revision is raised here."""
        if not documents:
            return Started([], [])
        kb_id = documents[0].kb_id
        carried = carried or {}

        async def work(session: AsyncClientSession) -> Started:
            stored = list(documents)
            if number:
                versions = await self._next_versions(
                    kb_id, [d.source_key for d in documents], session
                )
                stored = [
                    d.model_copy(update={"version": v})
                    for d, v in zip(documents, versions, strict=True)
                ]
            events = [
                Pending.of(DocumentUploaded.of(document, carried.get(document.id)))
                for document in stored
            ]
            await self._docs.insert_many([_record(d) for d in stored], session=session)
            await self._outbox.add(events, session)
            return Started(events, stored)

        return await self._transaction(work)

    async def _next_versions(
        self, kb_id: str, source_keys: Sequence[str], session: AsyncClientSession
    ) -> list[int]:
        """The next version number of each line, in order, raised in the caller's
        transaction."""
        wanted = Counter(source_keys)
        ids = {key: _source_id(kb_id, key) for key in wanted}
        await self._sources.bulk_write(
            [
                UpdateOne(
                    {"_id": ids[key]},
                    {
                        "$inc": {"next_version": count},
                        "$setOnInsert": {"kb_id": kb_id, "live_version": 0},
                    },
                    upsert=True,
                )
                for key, count in wanted.items()
            ],
            ordered=False,
            session=session,
        )
        cursor = self._sources.find({"_id": {"$in": list(ids.values())}}, session=session)
        last = {record["_id"]: int(record["next_version"]) async for record in cursor}
        # Each line's numbers end at its new `next_version`: hand them out from the first.
        handed = {key: last[ids[key]] - count for key, count in wanted.items()}
        versions = []
        for key in source_keys:
            handed[key] += 1
            versions.append(handed[key])
        return versions

    async def restart(
        self,
        document_id: str,
        *,
        tenant_id: str | None = None,
        kb_id: str | None = None,
        redrives: int = 0,
        uncounted_redrives: int = 0,
    ) -> tuple[Document, Pending]:
        """Starts a new run of the pipeline on a document (a new generation, queued) and
        queues its event. `redrives` and `uncounted_redrives` are the reconciler's counts of
        automatic restarts (a person's restart clears them). What is indexed stays searchable
        until the new run replaces it."""
        query: dict[str, Any] = {
            "_id": document_id,
            "parse_status": {"$ne": ParseStatus.DELETING.value},
        }
        if tenant_id is not None:
            query["tenant_id"] = tenant_id
        if kb_id is not None:
            query["kb_id"] = kb_id
        now = utcnow()
        update: dict[str, Any] = {
            "$set": {
                "parse_status": ParseStatus.QUEUED.value,
                "parse_error": None,
                "chunk_count": None,
                "attempts": {},
                "stage_started_at": {ParseStatus.QUEUED.value: now},
                "updated_at": now,
                "redrives": redrives,
                "uncounted_redrives": uncounted_redrives,
            },
            "$inc": {"generation": 1},
            "$unset": dict.fromkeys(RUN_FIELDS, ""),
        }

        async def work(session: AsyncClientSession) -> tuple[Document, Pending]:
            raw = await self._docs.find_one_and_update(
                query, update, return_document=ReturnDocument.AFTER, session=session
            )
            if raw is None:
                raise NotFound("document", document_id)
            document = to_document(raw)
            event = Pending.of(DocumentUploaded.of(document))
            await self._outbox.add([event], session)
            return document, event

        return await self._transaction(work)

    async def live_version(self, kb_id: str, source_key: str) -> int:
        """The version of a source that search shows now (0: none yet), read with the others
        asked for at the same moment."""
        (version,) = await self._live_reads.submit([_source_id(kb_id, source_key)])
        return version

    async def _live_versions(self, source_ids: list[str]) -> list[int]:
        async with mongo_errors():
            live = {
                str(record["_id"]): int(record.get("live_version", 0))
                async for record in self._sources.find(with_ids(source_ids), {"live_version": 1})
            }
        return [live.get(source_id, 0) for source_id in source_ids]

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        """Marks an indexed version live and retires older versions of its source, from what
        is stored.

        None if the document is gone, stale, or already finished (a replay). Runs finishing at
        the same moment share one transaction (four round trips; two more when a version
        replaces older ones: they are read and deleted).
        """
        (outcome,) = await self._finishes.submit([(document_id, generation)])
        return outcome

    async def finish_as_read(self, document: Document) -> Finished | None:
        """`finish`, for a run whose document is still stored as the caller read it (same
        run, unfinished, same chunk count, same readers) and of whose source no newer version
        is live: three round trips (conditional writes, and commit), nothing read. None if it
        is not so (nothing was done: the caller finds out why and calls `finish`). Runs
        finishing at the same moment share the transaction, all or none of them."""
        (outcome,) = await self._finishes_as_read.submit([document])
        return outcome

    async def _finish_all_as_read(self, documents: list[Document]) -> list[Finished | None]:
        if _may_finish_as_read(documents):
            try:
                return list(
                    await self._transaction(
                        lambda session: self._finish_as_read(documents, session)
                    )
                )
            except _Undecided:
                pass
        return [None] * len(documents)

    async def _finish_as_read(
        self, documents: list[Document], session: AsyncClientSession
    ) -> list[Finished]:
        """Marks each document indexed if it is stored as it was read, and makes it its
        source's live version if none newer is; all or nothing (`_Undecided`)."""
        now = utcnow()
        marked = await self._docs.bulk_write(
            [
                UpdateOne(
                    {
                        "_id": document.id,
                        "generation": document.generation,
                        "parse_status": {"$nin": [s.value for s in _FINAL]},
                        "chunk_count": document.chunk_count,
                        "readers": document.readers,
                    },
                    {"$set": _indexed(document, now)},
                )
                for document in documents
            ],
            ordered=False,
            session=session,
        )
        if marked.matched_count != len(documents) or not await self._moved_lines(
            documents, session
        ):
            raise _Undecided
        older = await self._retire_older_versions(documents, session)
        return [Finished(_as_indexed(document), older[document.id]) for document in documents]

    async def _finish_all(self, runs: list[tuple[str, int]]) -> list[Finished | Superseded | None]:
        """`finish` for each run of a batch, in one transaction."""
        return await self._transaction(lambda session: self._finish_by_reading(runs, session))

    async def _finish_by_reading(
        self, runs: list[tuple[str, int]], session: AsyncClientSession
    ) -> list[Finished | Superseded | None]:
        """Finishes the runs from what is stored: versions of one source go live in the order
        of their numbers, as if finished one after the other; a run named twice finishes
        once (the second is a replay)."""
        ready = await self._ready_to_finish(runs, session)
        outcomes: dict[tuple[str, int], Finished | Superseded] = {}
        moved = await self._moved_lines(ready, session)
        lines = (
            {
                str(line["_id"]): int(line.get("live_version", 0))
                async for line in self._sources.find(
                    with_ids(_source_id(d.kb_id, d.source_key) for d in ready), session=session
                )
            }
            if ready and not moved
            else {}
        )
        going: list[Document] = []
        newest: dict[str, Document] = {}
        for document in sorted(ready, key=lambda d: d.version):
            source = _source_id(document.kb_id, document.source_key)
            if not goes_live(document.version, lines.get(source)):
                outcomes[(document.id, document.generation)] = Superseded(document)
                continue
            lines[source] = document.version
            newest[source] = document
            going.append(document)
        if newest and not moved:
            await self._sources.bulk_write(
                [
                    UpdateOne(
                        {"_id": source},
                        {
                            "$set": {"live_version": document.version},
                            "$setOnInsert": {
                                "kb_id": document.kb_id,
                                "next_version": document.version,
                            },
                        },
                        upsert=True,
                    )
                    for source, document in newest.items()
                ],
                ordered=False,
                session=session,
            )
        older = await self._retire_older_versions(going, session)
        now = utcnow()
        if going:
            await self._docs.bulk_write(
                [
                    UpdateOne({"_id": document.id}, {"$set": _indexed(document, now)})
                    for document in going
                ],
                ordered=False,
                session=session,
            )
        for document in going:
            outcomes[(document.id, document.generation)] = Finished(
                _as_indexed(document), older[document.id]
            )
        # A run named twice is finished by its first message; the others are replays.
        return [outcomes.pop(run, None) for run in runs]

    async def _retire_older_versions(
        self, documents: list[Document], session: AsyncClientSession
    ) -> dict[str, list[Document]]:
        """Deletes the records of the older versions of these documents' sources; returns
        them, by the document that retired them."""
        older = await self._older_versions(documents, session)
        retired = {doc.id for docs in older.values() for doc in docs}
        if retired:
            await self._docs.delete_many({"_id": {"$in": sorted(retired)}}, session=session)
        return older

    async def _moved_lines(self, ready: list[Document], session: AsyncClientSession) -> bool:
        """Makes each of these versions its source's live one in one write, where that is
        sure to be right (no newer version is live, and no source is named twice); whether
        every one moved. If not, nothing was decided: the caller reads the lines as they are
        now (those that moved hold their new version, which goes live again, unchanged) and
        decides version by version."""
        sources = [_source_id(d.kb_id, d.source_key) for d in ready]
        if not ready or len(set(sources)) < len(sources):
            return False
        result = await self._sources.bulk_write(
            [
                UpdateOne(
                    {"_id": source, "live_version": {"$lte": document.version}},
                    {"$set": {"live_version": document.version}},
                )
                for source, document in zip(sources, ready, strict=True)
            ],
            ordered=False,
            session=session,
        )
        return result.matched_count == len(ready)

    async def _ready_to_finish(
        self, runs: list[tuple[str, int]], session: AsyncClientSession
    ) -> list[Document]:
        """The documents of these runs that are still current, unfinished and fully chunked."""
        wanted = set(runs)
        query = {
            **with_ids(document_id for document_id, _ in runs),
            "parse_status": {"$nin": [s.value for s in _FINAL]},
        }
        return [
            to_document(raw)
            async for raw in self._docs.find(query, session=session)
            if (str(raw["_id"]), raw.get("generation")) in wanted
            and raw.get("chunk_count") is not None
        ]

    async def _older_versions(
        self, documents: list[Document], session: AsyncClientSession
    ) -> dict[str, list[Document]]:
        """The older versions of each document's source, by document id: one read per KB
        (a source's first version has none, and its read is saved)."""
        older: dict[str, list[Document]] = {document.id: [] for document in documents}
        later = [document for document in documents if document.version > 1]
        for kb_id in sorted({document.kb_id for document in later}):
            mine = [document for document in later if document.kb_id == kb_id]
            keys = sorted({document.source_key for document in mine})
            query = {"kb_id": kb_id, "source_key": keys[0] if len(keys) == 1 else {"$in": keys}}
            async for raw in self._docs.find(query, session=session):
                other = to_document(raw)
                for document in mine:
                    if other.source_key == document.source_key and other.version < document.version:
                        older[document.id].append(other)
        return older

    async def withdraw(self, document_id: str, generation: int) -> KbRevisions | None:
        """Takes a failing run's chunks out of its KB's count (they are being deleted: a
        document re-indexed under its own id had its indexed chunks overwritten by this run),
        and moves the KB's revision on, since what search shows changed. None if the run is
        no longer current, or finished."""

        async def work(session: AsyncClientSession) -> str | None:
            raw = await self._docs.find_one(
                {
                    "_id": document_id,
                    "generation": generation,
                    "parse_status": {
                        "$nin": [ParseStatus.INDEXED.value, ParseStatus.DELETING.value]
                    },
                },
                session=session,
            )
            if raw is None:
                return None
            document = to_document(raw)
            if document.indexed_chunk_count:
                await self._docs.update_one(
                    {"_id": document_id}, {"$set": {"indexed_chunk_count": 0}}, session=session
                )
            return document.kb_id

        kb_id = await self._transaction(work)
        return None if kb_id is None else await self.touch(kb_id)

    async def remove(self, document_id: str) -> Removed | None:
        """Deletes a document's record (its chunks are gone already) and so takes it out of
        its KB's counts."""
        async with mongo_errors():
            found = await self._docs.find_one({"_id": document_id}, {"kb_id": 1})
        if found is None:
            return None
        # Raised first: once the record is gone nothing would raise it again, and what search
        # shows changed when the chunks went.
        revisions = await self.touch(str(found["kb_id"]))

        async def work(session: AsyncClientSession) -> Document | None:
            raw = await self._docs.find_one({"_id": document_id}, session=session)
            if raw is None:
                return None
            await self._docs.delete_one({"_id": document_id}, session=session)
            return to_document(raw)

        document = await self._transaction(work)
        return None if document is None else Removed(document, revisions)

    async def remove_kb(self, kb_id: str) -> None:
        """Deletes a KB's record, its documents' records and its version lines."""

        async def work(session: AsyncClientSession) -> None:
            await self._docs.delete_many({"kb_id": kb_id}, session=session)
            await self._sources.delete_many({"kb_id": kb_id}, session=session)
            await self._kbs.delete_one({"_id": kb_id}, session=session)

        await self._transaction(work)

    async def touch(self, kb_id: str) -> KbRevisions:
        """Raises the KB's revision (what search shows of it changed), by a write outside any
        transaction; its revision now (none if the KB is gone). Callers at the same moment
        share one raise of each KB: it comes after every one of their changes."""
        (revision,) = await self._touches.submit([kb_id])
        return {} if revision is None else {kb_id: revision}

    async def _touch_all(self, kb_ids: list[str]) -> list[int | None]:
        """One raise of each KB named, each in one round trip (a find-and-modify: the KBs are
        few, so the local server's scan of them costs nothing, see `infra.mongo.client`)."""
        revisions: dict[str, int | None] = {}
        async with mongo_errors():
            for kb_id in sorted(set(kb_ids)):
                kb = await self._kbs.find_one_and_update(
                    {"_id": kb_id},
                    {"$inc": {"revision": 1}, "$set": {"updated_at": utcnow()}},
                    projection={"revision": 1},
                    return_document=ReturnDocument.AFTER,
                )
                revisions[kb_id] = None if kb is None else int(kb["revision"])
        return [revisions[kb_id] for kb_id in kb_ids]

    async def _transaction(self, work: Callable[[AsyncClientSession], Awaitable[T]]) -> T:
        """Runs `work` in a transaction (retried whole on a transient error); its result."""
        return await in_transaction(self._client, work)


_FINAL = (ParseStatus.INDEXED, ParseStatus.FAILED, ParseStatus.DELETING)


def _may_finish_as_read(documents: list[Document]) -> bool:
    """Whether the documents may be finished as read: each fully chunked, no document and
    no source named twice."""
    if any(document.chunk_count is None for document in documents):
        return False
    ids = {document.id for document in documents}
    sources = {_source_id(d.kb_id, d.source_key) for d in documents}
    return len(ids) == len(sources) == len(documents)


def _record(document: Document) -> MongoDoc:
    """A new document's record as stored (what only its run adds is left out)."""
    record = document.model_dump(exclude={"id", "chunks_embedded", "batch_count", "chunker"})
    record["_id"] = document.id
    return record


def _indexed(document: Document, now: datetime) -> MongoDoc:
    """What marks a document indexed."""
    return {
        "parse_status": ParseStatus.INDEXED.value,
        "parse_error": None,
        "indexed_chunk_count": document.chunk_count or 0,
        "updated_at": now,
        "progressed_at": now,
        f"stage_started_at.{ParseStatus.INDEXED.value}": now,
    }


def _as_indexed(document: Document) -> Document:
    """The document as marked indexed."""
    return document.model_copy(
        update={
            "parse_status": ParseStatus.INDEXED,
            "parse_error": None,
            "indexed_chunk_count": document.chunk_count or 0,
        }
    )

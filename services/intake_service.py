"""The way documents come in: `IntakeService`, shared by the HTTP API and the records worker.

Every way a document comes in (an uploaded file, a text, a connector's record) ends here:
identical content is recognised and not processed twice, a new version of a source (same file
name or external id) is created next to the old one and replaces it when it is indexed, and
the pipeline is started by `DocumentUploaded`, written to the outbox with the document (one
transaction) and sent at once; if Kafka is down, the relay sends it later and the upload is
still accepted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from core.errors import Conflict, Forbidden, InvalidRequest, RateLimited
from core.governance import Governance, Reader
from infra.mongo.blob_store import BlobStore, NewFile, OriginalUpload, StoredUpload
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender
from infra.redis.rate_limits import RateLimiter
from schemas.domain import (
    TITLE_MAX_CHARS,
    Document,
    ItemKind,
    KnowledgeBase,
    ParseStatus,
    Record,
    file_source_key,
    new_document_id,
    record_source_key,
    utcnow,
)
from schemas.formats import CONTENT_TYPES, extension_of
from schemas.rules import ensure_changeable
from services.policy_service import PolicyService, Submission

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What an ingest call did."""

    CREATED = "created"
    UPDATED = "updated"  # a new version of an existing source
    UNCHANGED = "unchanged"  # identical content: the existing document is returned
    REINDEXED = "reindexed"


@dataclass
class Ingested:
    """A document and what ingesting it did."""

    document: Document
    outcome: Outcome


@dataclass(frozen=True)
class SyncRun:
    """A full sync of a source in progress: the documents it contains are tagged with it."""

    source: str
    run: str


@dataclass(frozen=True)
class TextItem:
    """A text to add: a record, or a wiki page (a record on the line of its topic)."""

    record: Record
    source_key: str
    kind: ItemKind = ItemKind.DOCUMENT
    topic: str | None = None
    summary: str = ""
    # The Markdown stored and indexed (default: the record's title over its content).
    text: str | None = None


class IntakeService:
    """Creates documents, new versions of them, and re-runs the pipeline on them."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        lifecycle: DocumentLifecycle,
        blobs: BlobStore,
        events: EventSender,
        policy: PolicyService,
        max_upload_bytes: int = 20 * 1024 * 1024,
        limits: RateLimiter | None = None,
        uploads_per_minute: int = 600,
    ) -> None:
        self._limits = limits
        self._uploads_per_minute = uploads_per_minute
        # Larger uploads are refused (413) while they stream in.
        self.max_upload_bytes = max_upload_bytes
        self._documents = documents
        self._kbs = kbs
        self._lifecycle = lifecycle
        self._blobs = blobs
        self._events = events
        self._policy = policy

    async def admit(self, tenant_id: str, documents: int = 1) -> None:
        """Counts documents a tenant adds over the API; `RateLimited` past its rate per
        minute (connectors' records over Kafka queue up instead)."""
        if self._limits is None:
            return
        retry = await self._limits.hit(
            "upload", tenant_id, self._uploads_per_minute, window_s=60, cost=documents
        )
        if retry:
            raise RateLimited("documents added", retry)

    async def writable_kb(self, tenant_id: str, kb_id: str) -> KnowledgeBase:
        """The KB, if documents may be added to it (it exists and is not being deleted)."""
        return ensure_changeable(await self._kbs.get(tenant_id, kb_id))

    def open_original(self, filename: str, document_id: str) -> OriginalUpload:
        """Where an upload's bytes are streamed to, under the new document's id."""
        return self._blobs.start_original(filename, document_id)

    async def discard(self, stored: StoredUpload) -> None:
        """Deletes an upload's stored bytes (the upload was refused)."""
        await self._blobs.delete(stored.storage_key)

    async def accept_file(
        self,
        tenant_id: str,
        kb_id: str,
        document_id: str,
        filename: str,
        stored: StoredUpload,
        *,
        by: Submission,
        title: str | None = None,
        reindex: bool = False,
        url: str | None = None,
        sync: SyncRun | None = None,
        kb: KnowledgeBase | None = None,
    ) -> Ingested:
        """Takes an uploaded file whose bytes are already stored under `document_id`.

        Identical bytes the caller can read are that document; a file of the same name on the
        caller's version line is a new version of it (with its permissions, unless changed).
        A file fetched from a `url` (a crawl) is keyed by it instead: its external id and
        version line are the URL; with `sync`, the document joins that sync run. `kb`: the
        KB as the caller found it writable just before (`writable_kb`, as an upload checks
        it before its bytes come in), else it is read here.
        """
        try:
            if stored.size_bytes == 0:
                raise InvalidRequest("the file is empty: there is nothing to index")
            if kb is None:
                kb = await self.writable_kb(tenant_id, kb_id)
            identical = await self._documents.find_identical(kb_id, stored.sha256)
            if identical is not None and not self._policy.visible(by.reader, identical):
                identical = None
            line = record_source_key(url) if url else file_source_key(filename)
            source_key = by.source_key(line)
            previous = await self._documents.latest_of_source(kb_id, source_key)
            self._check_may_add_version(by, previous)
            governance = await self._policy.for_new_item(
                tenant_id, kb, by, previous.governance if previous else None
            )
        except BaseException:
            await self._blobs.delete(stored.storage_key)
            raise
        if identical is not None:
            await self._blobs.delete(stored.storage_key)
            if sync is not None:
                await self._documents.mark_synced([identical.id], sync.source, sync.run)
            if not reindex:
                return Ingested(identical, Outcome.UNCHANGED)
            document = await self.reindex(tenant_id, kb_id, identical.id, by.reader)
            return Ingested(document, Outcome.REINDEXED)
        document = await self._create(
            document_id=document_id,
            tenant_id=tenant_id,
            kb_id=kb_id,
            filename=filename,
            title=title or filename,
            content_type=CONTENT_TYPES[extension_of(filename)],
            stored=stored,
            source_key=source_key,
            external_id=url,
            url=url,
            governance=governance,
            knowledge_item_id=previous.knowledge_item_id if previous else document_id,
            sync=sync,
        )
        return Ingested(document, Outcome.UPDATED if previous else Outcome.CREATED)

    async def accept_record(
        self, tenant_id: str, kb_id: str, record: Record, by: Submission, *, batch: bool = False
    ) -> Ingested:
        """Upserts one text record (see `accept_records`)."""
        return (await self.accept_records(tenant_id, kb_id, [record], by, batch=batch))[0]

    async def accept_records(
        self,
        tenant_id: str,
        kb_id: str,
        records: Sequence[Record],
        by: Submission,
        *,
        batch: bool = True,
        sync: SyncRun | None = None,
    ) -> list[Ingested]:
        """Upserts text records: by external id if they have one, else by their content.

        Unchanged records cost nothing (a changed permission is applied without re-indexing);
        a changed one becomes a new version that replaces the old one once indexed. New
        documents are created together in one transaction.
        """
        items = [
            TextItem(
                record,
                by.source_key(record_source_key(record.external_id)) if record.external_id else "",
            )
            for record in records
        ]
        return await self.accept_texts(tenant_id, kb_id, items, by, batch=batch, sync=sync)

    async def accept_texts(
        self,
        tenant_id: str,
        kb_id: str,
        items: Sequence[TextItem],
        by: Submission,
        *,
        batch: bool = False,
        sync: SyncRun | None = None,
    ) -> list[Ingested]:
        """Upserts texts on their version lines (`source_key`; none: keyed by content); with
        `sync`, every document of the texts is tagged with the run."""
        kb = await self.writable_kb(tenant_id, kb_id)
        latest = await self._documents.latest_of_sources(
            kb_id, [item.source_key for item in items if item.source_key]
        )
        results: list[Ingested | None] = [None] * len(items)
        fresh: list[tuple[int, Governance, str | None]] = []
        retained: list[tuple[int, Document, Governance]] = []
        for position, item in enumerate(items):
            fingerprint = item.record.fingerprint()
            if item.source_key:
                previous = latest.get(item.source_key)
                self._check_may_add_version(by, previous)
            else:
                previous = await self._documents.find_identical(kb_id, fingerprint)
                if previous is not None and not self._policy.visible(by.reader, previous):
                    previous = None
            governance = self._policy.decide(
                kb, by, previous.governance if previous else None, batch=batch
            )
            if previous is None or previous.sha256 != fingerprint:
                item_id = previous.knowledge_item_id if previous else None
                fresh.append((position, governance, item_id))
                continue
            retained.append((position, previous, governance))
        distinct = {g.model_dump_json(): g for _, g, _ in fresh} | {
            g.model_dump_json(): g for _, _, g in retained
        }
        for governance in distinct.values():
            await self._policy.check_exists(tenant_id, governance)
        if sync is not None:
            synced = [previous.id for _, previous, _ in retained]
            await self._documents.mark_synced(synced, sync.source, sync.run)
        for position, previous, governance in retained:
            changed = governance != previous.governance
            if changed:
                # A changed permission is stored, then shown by running the pipeline again
                # (its vectors come from the embedding cache).
                await self._documents.set_governance(
                    tenant_id, previous.knowledge_item_id, governance
                )
            if changed or previous.parse_status is ParseStatus.FAILED:
                document = await self.reindex(tenant_id, kb_id, previous.id)
                results[position] = Ingested(document, Outcome.REINDEXED)
            else:
                results[position] = Ingested(previous, Outcome.UNCHANGED)
        documents, carried = await self._prepare_texts(
            tenant_id,
            kb_id,
            [(items[position], g, item_id) for position, g, item_id in fresh],
            sync,
        )
        try:
            started = await self._lifecycle.create(documents, carried, number=True)
        except BaseException:
            for document in documents:
                await self._blobs.delete(document.storage_key)
            raise
        await self._events.send_now(started.events)
        for (position, _, item_id), document in zip(fresh, started.documents, strict=True):
            outcome = Outcome.UPDATED if item_id else Outcome.CREATED
            results[position] = Ingested(document, outcome)
        return [result for result in results if result is not None]

    @staticmethod
    def _check_may_add_version(by: Submission, previous: Document | None) -> None:
        """Only an item's owner or an admin adds a version of it (a user's own version lines
        hold their items, unless an admin gave one to someone else)."""
        if previous is not None and not by.reader.manages(previous.governance):
            raise Forbidden("only the item's owner or an admin can add a version of it")

    async def _prepare_texts(
        self,
        tenant_id: str,
        kb_id: str,
        texts: list[tuple[TextItem, Governance, str | None]],
        sync: SyncRun | None = None,
    ) -> tuple[list[Document], dict[str, bytes]]:
        """Stores the texts' originals, all at once; returns the documents (numbered when
        they are created), and the small originals their events carry, by document id."""
        if not texts:
            return [], {}
        document_ids = [new_document_id() for _ in texts]
        source_keys = [
            item.source_key or f"text:{document_id}"
            for (item, _, _), document_id in zip(texts, document_ids, strict=True)
        ]
        names = [
            item.topic or item.record.title.strip() or item.record.external_id or "text"
            for item, _, _ in texts
        ]
        originals = await self._blobs.store_originals(
            [
                NewFile(
                    (item.text or item.record.as_markdown()).encode(), f"{name}.md", document_id
                )
                for (item, _, _), name, document_id in zip(texts, names, document_ids, strict=True)
            ]
        )
        now = utcnow()
        carried = {
            document_id: original.data
            for document_id, original in zip(document_ids, originals, strict=True)
            if original.data is not None
        }
        documents = [
            Document(
                id=document_id,
                tenant_id=tenant_id,
                kb_id=kb_id,
                filename=name,
                title=(item.record.title.strip() or name)[:500],
                content_type=CONTENT_TYPES[".md"],
                size_bytes=original.size_bytes,
                sha256=item.record.fingerprint(),
                storage_key=original.storage_key,
                source_key=source_key,
                external_id=item.record.external_id,
                url=item.record.url,
                metadata=dict(item.record.metadata),
                parse_status=ParseStatus.QUEUED,
                stage_started_at={ParseStatus.QUEUED.value: now},
                created_at=now,
                updated_at=now,
                governance=governance,
                knowledge_item_id=item_id or document_id,
                kind=item.kind,
                topic=item.topic,
                summary=item.summary,
                source=sync.source if sync else None,
                sync_run=sync.run if sync else None,
            )
            for (
                item,
                governance,
                item_id,
            ), name, document_id, source_key, original in zip(
                texts, names, document_ids, source_keys, originals, strict=True
            )
        ]
        return documents, carried

    async def replace_record(
        self, tenant_id: str, kb_id: str, document_id: str, record: Record, by: Submission
    ) -> Ingested:
        """Replaces a record's title, body and URL (a new version on its line, keeping its
        external id and permissions); its owner or an admin only."""
        current = await self._documents.get(tenant_id, kb_id, document_id)
        PolicyService.manageable(by.reader, current)
        if current.external_id is None:
            raise Conflict(
                f"document {document_id!r} is a file, not a record with an external id; "
                "upload a new version of the file instead"
            )
        replacement = record.model_copy(update={"external_id": current.external_id})
        item = TextItem(replacement, current.source_key)
        sync = SyncRun(current.source, current.sync_run or "") if current.source else None
        return (await self.accept_texts(tenant_id, kb_id, [item], by, sync=sync))[0]

    async def reindex(
        self, tenant_id: str, kb_id: str, document_id: str, reader: Reader | None = None
    ) -> Document:
        """Runs the pipeline again on a document's stored original; a `reader` must be its
        owner or an admin (none: the intake itself re-runs it)."""
        if reader is not None:
            current = await self._documents.get(tenant_id, kb_id, document_id)
            PolicyService.manageable(reader, current)
        document, event = await self._lifecycle.restart(
            document_id, tenant_id=tenant_id, kb_id=kb_id
        )
        await self._events.send_now([event])
        return document

    async def _create(
        self,
        *,
        document_id: str,
        tenant_id: str,
        kb_id: str,
        filename: str,
        title: str,
        content_type: str,
        stored: StoredUpload,
        source_key: str,
        external_id: str | None = None,
        url: str | None = None,
        metadata: dict[str, object] | None = None,
        governance: Governance,
        knowledge_item_id: str,
        sync: SyncRun | None = None,
    ) -> Document:
        now = utcnow()
        try:
            document = Document(
                id=document_id,
                tenant_id=tenant_id,
                kb_id=kb_id,
                filename=filename,
                title=title[:TITLE_MAX_CHARS],
                content_type=content_type,
                size_bytes=stored.size_bytes,
                sha256=stored.sha256,
                storage_key=stored.storage_key,
                source_key=source_key,
                external_id=external_id,
                url=url,
                metadata=dict(metadata or {}),
                parse_status=ParseStatus.QUEUED,
                stage_started_at={ParseStatus.QUEUED.value: now},
                created_at=now,
                updated_at=now,
                governance=governance,
                knowledge_item_id=knowledge_item_id,
                source=sync.source if sync else None,
                sync_run=sync.run if sync else None,
            )
            carried = {document.id: stored.data} if stored.data is not None else {}
            started = await self._lifecycle.create([document], carried, number=True)
        except BaseException:
            await self._blobs.delete(stored.storage_key)
            raise
        await self._events.send_now(started.events)
        return started.documents[0]

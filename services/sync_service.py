"""Full sync of a source: a KB's documents of that source become exactly the given
records. New records are added, changed ones become new versions (the old version stays
searchable until the new one is indexed), and records missing from the run are deleted once
the run's records are in. So search never returns neither the old nor the new version of a
record that stays."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.errors import NotFound
from core.governance import Reader
from infra.mongo.document_repository import DocumentRepository
from schemas.domain import Record
from services.intake_service import Ingested, IntakeService, SyncRun
from services.policy_service import Submission

# Deletes (or retires, where the vector store is not at hand) one document for a reader.
RemoveDocument = Callable[[str, str, str, Reader], Awaitable[None]]


@dataclass(frozen=True)
class Synced:
    """What a sync did: each record's outcome, and the documents it removed."""

    run: str
    results: list[Ingested]
    removed: list[str]


def new_sync_run() -> str:
    """A fresh sync run id."""
    return f"sync_{secrets.token_hex(8)}"


class SyncService:
    """Makes a KB's documents of a source exactly a set of records."""

    def __init__(
        self, intake: IntakeService, documents: DocumentRepository, remove: RemoveDocument
    ) -> None:
        self._intake = intake
        self._documents = documents
        self._remove = remove

    async def sync(
        self,
        tenant_id: str,
        kb_id: str,
        source: str,
        records: Sequence[Record],
        by: Submission,
    ) -> Synced:
        """Upserts the records (by external id) as the source's, then removes the source's
        documents the records do not name."""
        run = new_sync_run()
        results = await self._intake.accept_records(
            tenant_id, kb_id, records, by, sync=SyncRun(source, run)
        )
        removed = await self.finish(tenant_id, kb_id, source, run, by.reader)
        return Synced(run, results, removed)

    async def lines_in_run(self, tenant_id: str, kb_id: str, source: str, run: str) -> set[str]:
        """The records (version lines) a run holds so far."""
        return await self._documents.lines_in_run(tenant_id, kb_id, source, run)

    async def finish(
        self, tenant_id: str, kb_id: str, source: str, run: str, reader: Reader
    ) -> list[str]:
        """Deletes the source's documents on version lines the run did not touch; returns
        their ids."""
        stale = await self._documents.not_in_run(tenant_id, kb_id, source, run)
        touched = await self._documents.lines_in_run(tenant_id, kb_id, source, run)
        removed = []
        for document in stale:
            if document.source_key in touched:
                continue  # an older version of a record the run holds: retired when replaced
            try:
                await self._remove(tenant_id, kb_id, document.id, reader)
            except NotFound:
                continue  # deleted meanwhile
            removed.append(document.id)
        return removed

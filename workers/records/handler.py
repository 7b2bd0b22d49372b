"""Records stage: connectors' records from `records.ingest.v1` into the pipeline.

A record is upserted by its external id: unchanged content costs nothing, changed content
becomes a new version that replaces the old one once indexed. Records of a full sync carry its
run; the run's closing message removes the source's documents the run did not hold, once all
the run's records are in (they may come through other partitions, so it waits for them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from core.errors import PermanentError
from core.governance import Reader
from schemas.domain import Record
from schemas.events import RecordPublished, SyncMarker
from services.intake_service import Ingested, Outcome, SyncRun
from services.policy_service import Submission
from workers.ports import StageResult


class RecordIntake(Protocol):
    """Takes records (`services.intake_service.IntakeService`)."""

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
        """Upserts records."""
        ...


class SyncEnd(Protocol):
    """Finishes a full sync (`services.sync_service.SyncService` over the document repository)."""

    async def lines_in_run(self, tenant_id: str, kb_id: str, source: str, run: str) -> set[str]:
        """The records (version lines) a run holds so far."""
        ...

    async def finish(
        self, tenant_id: str, kb_id: str, source: str, run: str, reader: Reader
    ) -> list[str]:
        """Removes the source's documents the run did not hold."""
        ...


class SyncIncomplete(PermanentError):
    """A sync run's records did not all come in: nothing was removed."""


# Puts a message back at the end of the records topic.
Requeue = Callable[[RecordPublished], Awaitable[None]]


class RecordHandler:
    """Hands each published record to the intake, and closes sync runs."""

    def __init__(
        self,
        intake: RecordIntake,
        syncs: SyncEnd,
        requeue: Requeue,
        wait_s: float = 0.5,
        max_waits: int = 240,
    ) -> None:
        self._intake = intake
        self._syncs = syncs
        self._requeue = requeue
        self._wait_s = wait_s
        self._max_waits = max_waits

    async def __call__(self, event: RecordPublished) -> StageResult:
        """Handles one `RecordPublished`."""
        by = Submission.connector(event.governance, event.confirm_tenant_wide)
        if event.record is None:
            assert event.sync is not None
            return await self._close(event, event.sync, by.reader)
        sync = SyncRun(event.sync.source, event.sync.run) if event.sync else None
        ingested = (
            await self._intake.accept_records(
                event.tenant_id, event.kb_id, [event.record], by, batch=True, sync=sync
            )
        )[0]
        unchanged = ingested.outcome is Outcome.UNCHANGED
        return StageResult(skipped=unchanged, finished_document=not unchanged)

    async def _close(self, event: RecordPublished, sync: SyncMarker, reader: Reader) -> StageResult:
        """Removes what the run did not hold once all its records are in; until then the
        closing message goes back to the end of the topic (the records may sit in other
        partitions, behind it), a bounded number of times."""
        held = await self._syncs.lines_in_run(event.tenant_id, event.kb_id, sync.source, sync.run)
        expected = sync.record_count or 0
        if len(held) < expected:
            if sync.waited >= self._max_waits:
                raise SyncIncomplete(
                    f"sync run {sync.run!r} of {sync.source!r}: only {len(held)} of its "
                    f"{expected} records came in; nothing was removed (re-drive this message "
                    "once they are in)"
                )
            await asyncio.sleep(self._wait_s)
            again = sync.model_copy(update={"waited": sync.waited + 1})
            await self._requeue(event.model_copy(update={"sync": again}))
            return StageResult(skipped=True)
        await self._syncs.finish(event.tenant_id, event.kb_id, sync.source, sync.run, reader)
        return StageResult()

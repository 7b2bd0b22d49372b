"""Records stage: connectors' records from `records.ingest.v1` into the pipeline.

A record is upserted by its external id: unchanged content costs nothing, changed content
becomes a new version that replaces the old one once indexed.
"""

from __future__ import annotations

from typing import Protocol

from schemas.domain import Record
from schemas.events import RecordPublished
from services.governance import Submission
from services.intake import Ingested, Outcome
from workers.ports import StageResult


class RecordIntake(Protocol):
    """Takes records (`services.intake.Intake`)."""

    async def accept_record(
        self, tenant_id: str, kb_id: str, record: Record, by: Submission, *, batch: bool = False
    ) -> Ingested:
        """Upserts one record."""
        ...


class RecordHandler:
    """Hands each published record to the intake."""

    def __init__(self, intake: RecordIntake) -> None:
        self._intake = intake

    async def __call__(self, event: RecordPublished) -> StageResult:
        """Handles one `RecordPublished`."""
        by = Submission.connector(event.governance, event.confirm_tenant_wide)
        ingested = await self._intake.accept_record(
            event.tenant_id, event.kb_id, event.record, by, batch=True
        )
        unchanged = ingested.outcome is Outcome.UNCHANGED
        return StageResult(skipped=unchanged, finished_document=not unchanged)

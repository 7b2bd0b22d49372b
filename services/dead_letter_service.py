"""Dead letters: what the pipeline gave up on, listed per tenant and started again on request.

A document stage's letter is re-driven through a re-index of its document (a new run, through
the outbox), so whatever the stage had half done is superseded; a connector's record goes back
onto the records topic as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.errors import InvalidRequest, NotFound
from infra.mongo.dead_letter_repository import DeadLetterRepository
from infra.mongo.outbox import EventSender, Pending
from schemas.domain import DeadLetterEntry
from schemas.events import RecordPublished
from schemas.topics import RECORDS_INGEST
from services.intake_service import IntakeService

# Letters re-driven by one "re-drive all" call, at most.
REDRIVE_ALL_LIMIT = 500


@dataclass(frozen=True)
class Redriven:
    """A letter started again, and the document it re-runs (none for a connector record)."""

    letter: DeadLetterEntry
    document_id: str | None


class DeadLetterService:
    """Lists and re-drives a tenant's dead letters."""

    def __init__(
        self, letters: DeadLetterRepository, intake: IntakeService, events: EventSender
    ) -> None:
        self._letters = letters
        self._intake = intake
        self._events = events

    async def page(
        self,
        tenant_id: str,
        limit: int,
        *,
        stage: str | None = None,
        include_redriven: bool = False,
        before: datetime | None = None,
    ) -> list[DeadLetterEntry]:
        """The tenant's letters, newest first (re-driven ones only when asked)."""
        return await self._letters.page(
            tenant_id, limit, stage=stage, include_redriven=include_redriven, before=before
        )

    async def redrive(self, tenant_id: str, letter_id: str) -> Redriven:
        """Starts a letter's work again; `NotFound` if the letter (or its document) is gone."""
        found = await self._letters.get(tenant_id, letter_id)
        if found is None:
            raise NotFound("dead letter", letter_id)
        letter, message = found
        document_id = None
        if letter.stage == "records":
            await self._events.queue([self._record_entry(letter, message)])
        else:
            if letter.document_id is None or letter.kb_id is None:
                raise InvalidRequest(
                    f"dead letter {letter_id!r} names no document; it cannot be re-driven"
                )
            document = await self._intake.reindex(tenant_id, letter.kb_id, letter.document_id)
            document_id = document.id
        await self._letters.mark_redriven(letter.id)
        return Redriven(letter, document_id)

    async def redrive_all(self, tenant_id: str, stage: str | None = None) -> list[Redriven]:
        """Re-drives every letter of the tenant not re-driven yet (a document gone since is
        passed over: nothing is left to run)."""
        done = []
        for letter in await self.page(tenant_id, REDRIVE_ALL_LIMIT, stage=stage):
            try:
                done.append(await self.redrive(tenant_id, letter.id))
            except NotFound:
                await self._letters.mark_redriven(letter.id)
            except InvalidRequest:
                continue  # listed with its error; a person decides
        return done

    @staticmethod
    def _record_entry(letter: DeadLetterEntry, message: bytes | None) -> Pending:
        if message is None:
            raise InvalidRequest(
                f"dead letter {letter.id!r} was too large to keep; publish the record again"
            )
        try:
            record = RecordPublished.model_validate_json(message)
        except ValueError as exc:
            raise InvalidRequest(
                f"dead letter {letter.id!r} is not a valid record ({exc.__class__.__name__}); "
                "publish a corrected record instead"
            ) from exc
        return Pending(RECORDS_INGEST, record.key, message)

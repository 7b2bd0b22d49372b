"""Recovery without people: the reconciler of stuck documents (`ReconcilerService`: restarts a
document that stopped moving, a bounded number of times, before failing it with a reason; the
outbox's relay is `services.relay_service`). When a document counts as stuck, and whose fault
it is: docs/concepts/failures.md."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from core.errors import NotFound
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender, Pending
from infra.process.metrics import REDRIVES
from schemas.domain import Document, utcnow

log = logging.getLogger(__name__)

# Documents looked at per reconciler pass, at most.
PASS_LIMIT = 1_000


class ReconcilerService:
    """Re-drives documents that stopped moving, a bounded number of times each."""

    def __init__(
        self,
        documents: DocumentRepository,
        lifecycle: DocumentLifecycle,
        events: EventSender,
        stall_after_s: float,
        max_redrives: int,
        max_uncounted_redrives: int,
    ) -> None:
        self._documents = documents
        self._lifecycle = lifecycle
        self._events = events
        self._stall_after = timedelta(seconds=stall_after_s)
        # A stage touches the document it works on this often (`workers.runtime`).
        self._heartbeat = self._stall_after / 4
        self._max_redrives = max_redrives
        self._max_uncounted = max_uncounted_redrives

    async def redrive_stalled(self) -> int:
        """If nothing in progress moved within the stall deadline, re-drives what is in
        progress. Returns how many documents were re-driven or failed."""
        before = utcnow() - self._stall_after
        last = await self._documents.last_progress()
        if last is None or last >= before:
            return 0
        now = utcnow()
        stalled = [
            document
            for document in await self._documents.in_progress(before, PASS_LIMIT)
            if document.updated_at < now - self._stall_after * 2 ** _restarts(document)
        ]
        if not stalled:
            return 0
        latest = await self._documents.latest_progress()
        return await self._redrive(stalled, "stalled", latest)

    async def redrive_in_flight(self, reason: str) -> int:
        """Re-drives everything in progress (its events were lost with the broker's)."""
        in_flight = await self._documents.in_progress(utcnow() + timedelta(seconds=1), PASS_LIMIT)
        return await self._redrive(in_flight, reason, None)

    def _others_moved(self, document: Document, latest: list[tuple[str, datetime]]) -> bool:
        """Whether a stage moved another document on since this one last moved or was
        restarted (its `updated_at`), beyond one heartbeat."""
        quiet_since = document.updated_at + self._heartbeat
        return any(other != document.id and at > quiet_since for other, at in latest)

    async def _redrive(
        self,
        documents: list[Document],
        reason: str,
        latest: list[tuple[str, datetime]] | None,
    ) -> int:
        """Restarts the documents (failing those out of restarts); `latest` is the latest
        progress elsewhere, None for restarts that count in neither bound."""
        waiting = await self._events.outbox.waiting_documents([d.id for d in documents])
        events: list[Pending] = []
        handled = 0
        for document in documents:
            if document.id in waiting:
                continue  # its event is on the way (Kafka was down): not stuck
            handled += 1
            redrives, uncounted = document.redrives, document.uncounted_redrives
            if latest is not None and self._others_moved(document, latest):
                if redrives >= self._max_redrives:
                    await self._fail(document, reason, alone=False)
                    continue
                redrives += 1
            elif latest is not None:
                if uncounted >= self._max_uncounted:
                    await self._fail(document, reason, alone=True)
                    continue
                uncounted += 1
            try:
                restarted, event = await self._lifecycle.restart(
                    document.id, redrives=redrives, uncounted_redrives=uncounted
                )
            except NotFound:
                continue  # deleted meanwhile
            events.append(event)
            REDRIVES.labels(reason, "redriven").inc()
            log.warning(
                "re-driving document %s (stopped in %s; restart %d of %d counted against it, "
                "%d of %d not, %s)",
                document.id, document.parse_status.value, restarted.redrives,
                self._max_redrives, restarted.uncounted_redrives, self._max_uncounted, reason,
            )  # fmt: skip
        await self._events.send_now(events)
        return handled

    async def _fail(self, document: Document, reason: str, *, alone: bool) -> None:
        stage = document.parse_status.value
        restarts = _restarts(document)
        while_idle = ", while no other document was moving either," if alone else ""
        failed = await self._documents.mark_failed(
            document.id,
            document.generation,
            f"processing stopped while {stage} and did not resume after {restarts} automatic "
            f"restarts{while_idle}; re-index the document to try again (if it stops again, the "
            "file itself may be the cause)",
            by_stage=False,
        )
        if failed:
            REDRIVES.labels(reason, "failed").inc()
            log.warning("document %s failed: stuck in %s", document.id, stage)


def _restarts(document: Document) -> int:
    """The reconciler's restarts of the document's current line of runs, counted or not."""
    return document.redrives + document.uncounted_redrives

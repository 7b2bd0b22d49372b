"""Recovery without people: the outbox relay and the reconciler of stuck documents.

`RelayService` sends the outbox's events that the process writing them could not send (Kafka was
down). `ReconcilerService` finds documents in progress that stopped moving and starts their pipeline
again through the normal path (`DocumentLifecycle.restart`: a new generation and its event, in
one transaction), a bounded number of times before failing them with a reason.

When is a document stuck? Every stage touches the document it works on (`ragline.stages.runtime`),
so a document that has not moved for `stall_after_s` is not being worked on. It may still be
waiting its turn behind a backlog, so documents are re-driven only when nothing in progress
has moved for that long: a busy pipeline is never second-guessed. Each automatic restart of a
document doubles the patience before the next (`stall_after_s`, then twice, four times…), so
an outage that keeps the whole pipeline still for a while (a broker's consumers rejoining) does
not use up a document's restarts. After a broker that lost its messages (the local broker
keeps them in memory), everything in flight is re-driven at once, without counting it against
the documents.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from core.errors import NotFound
from infra.document_repository import DocumentRepository
from infra.lifecycle import DocumentLifecycle
from infra.metrics import OUTBOX_RELAYED, REDRIVES
from infra.outbox import EventSender, Outbox, Pending, dispatch
from schemas.domain import Document, utcnow
from schemas.events import Send

log = logging.getLogger(__name__)

# Documents looked at per reconciler pass, at most.
PASS_LIMIT = 1_000


class RelayService:
    """Sends the events left in the outbox, oldest first."""

    def __init__(self, outbox: Outbox, send: Send, batch: int, send_after_s: float) -> None:
        self._outbox = outbox
        self._send = send
        self._batch = batch
        self._send_after = timedelta(seconds=send_after_s)

    async def drain(self) -> int:
        """Sends every entry older than the grace period; raises `ServiceUnavailable` (the
        entries stay) if Kafka or MongoDB fails. Returns how many were sent."""
        sent = 0
        while True:
            due = await self._outbox.due(utcnow() - self._send_after, self._batch)
            if not due:
                return sent
            await dispatch(self._outbox, self._send, due)
            OUTBOX_RELAYED.inc(len(due))
            sent += len(due)
            if len(due) < self._batch:
                return sent


class ReconcilerService:
    """Re-drives documents that stopped moving, a bounded number of times each."""

    def __init__(
        self,
        documents: DocumentRepository,
        lifecycle: DocumentLifecycle,
        events: EventSender,
        stall_after_s: float,
        max_redrives: int,
    ) -> None:
        self._documents = documents
        self._lifecycle = lifecycle
        self._events = events
        self._stall_after = timedelta(seconds=stall_after_s)
        self._max_redrives = max_redrives

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
            if document.updated_at < now - self._stall_after * 2**document.redrives
        ]
        return await self._redrive(stalled, "stalled")

    async def redrive_in_flight(self, reason: str) -> int:
        """Re-drives everything in progress (its events were lost with the broker's)."""
        in_flight = await self._documents.in_progress(utcnow() + timedelta(seconds=1), PASS_LIMIT)
        return await self._redrive(in_flight, reason, counted=False)

    async def _redrive(self, documents: list[Document], reason: str, counted: bool = True) -> int:
        waiting = await self._events.outbox.waiting_documents([d.id for d in documents])
        events: list[Pending] = []
        handled = 0
        for document in documents:
            if document.id in waiting:
                continue  # its event is on the way (Kafka was down): not stuck
            handled += 1
            if counted and document.redrives >= self._max_redrives:
                await self._fail(document, reason)
                continue
            redrives = document.redrives + 1 if counted else document.redrives
            try:
                restarted, event = await self._lifecycle.restart(document.id, redrives=redrives)
            except NotFound:
                continue  # deleted meanwhile
            events.append(event)
            REDRIVES.labels(reason, "redriven").inc()
            log.warning(
                "re-driving document %s (stopped in %s; restart %d of %d, %s)",
                document.id, document.parse_status.value, restarted.redrives,
                self._max_redrives, reason,
            )  # fmt: skip
        await self._events.send_now(events)
        return handled

    async def _fail(self, document: Document, reason: str) -> None:
        stage = document.parse_status.value
        failed = await self._documents.mark_failed(
            document.id,
            document.generation,
            f"processing stopped while {stage} and did not resume after {document.redrives} "
            "automatic restarts; re-index the document to try again (if it stops again, the "
            "file itself may be the cause)",
        )
        if failed:
            REDRIVES.labels(reason, "failed").inc()
            log.warning("document %s failed: stuck in %s", document.id, stage)

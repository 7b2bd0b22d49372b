"""Recovery without people: the outbox relay and the reconciler of stuck documents.

`RelayService` sends the outbox's events that the process writing them could not send (Kafka was
down). `ReconcilerService` finds documents in progress that stopped moving and starts their pipeline
again through the normal path (`DocumentLifecycle.restart`: a new generation and its event, in
one transaction), a bounded number of times before failing them with a reason.

When is a document stuck? Every stage touches the document it works on (`workers.runtime`),
so a document that has not moved for `stall_after_s` is not being worked on. It may still be
waiting its turn behind a backlog, so documents are re-driven only when nothing in progress
has moved for that long: a busy pipeline is never second-guessed. Each automatic restart of a
document doubles the patience before the next (`stall_after_s`, then twice, four times…).

Whose fault is it? A restart counts against the document (`redrives`, failing it at
`max_redrives`) only when other documents moved on while it did not: a stage took another one
into its next stage, or ended it indexed or failed (`progressed_at`), after this one was last
restarted or last touched (with one heartbeat's slack, a quarter of `stall_after_s`: a document
being worked on is touched that often). The reconciler's own restarts and failures are not
progress, so restarting ten stuck documents in one pass does not make each look like the others
moved. When nothing else moved either, the pipeline as a whole was still (an outage: a broker's
consumers rejoining, a server down), and the restart is not the document's fault. Yet a lone
poison document in an otherwise idle system looks the same, so restarts not counted have a
bound of their own, larger (`max_uncounted_redrives`); the patience doubles over all restarts,
so reaching that bound takes long (about 21 hours with the defaults). After a broker that lost
its messages (the local broker keeps them in memory), everything in flight is re-driven at once,
counted in neither.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from core.errors import NotFound
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender, Outbox, Pending, dispatch
from infra.process.metrics import OUTBOX_RELAYED, REDRIVES
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

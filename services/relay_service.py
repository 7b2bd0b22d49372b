"""The outbox's relay: sends the pipeline events that the process writing them could not send
(Kafka was down), oldest first."""

from __future__ import annotations

from datetime import timedelta

from infra.mongo.outbox import Outbox, dispatch
from infra.process.metrics import OUTBOX_RELAYED
from schemas.domain import utcnow
from schemas.events import Send


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

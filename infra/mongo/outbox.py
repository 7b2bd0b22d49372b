"""The transactional outbox: pipeline events stored with the change that causes them.

A document change and the event that starts its pipeline are written in one MongoDB
transaction (`infra.mongo.lifecycle`), so an accepted upload can never lose its event: if Kafka is
down, the event waits here until the relay (`python -m workers relay`) publishes it. An entry
is deleted once Kafka has acknowledged it (by the API in the background, with the others of the
same moment); sending one twice is harmless (every stage is idempotent).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pymongo import ASCENDING
from pymongo.asynchronous.client_session import AsyncClientSession

from core.coalescing import Coalescer
from core.errors import RetryableError
from infra.mongo.client import OUTBOX, Database, MongoDoc, mongo_errors
from infra.process.metrics import OUTBOX_DEFERRED
from schemas.domain import utcnow
from schemas.events import Event, Send
from schemas.topics import topic_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pending:
    """An event waiting to be published."""

    topic: str
    key: bytes
    value: bytes
    document_id: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: datetime = field(default_factory=utcnow)

    @classmethod
    def of(cls, event: Event) -> Pending:
        """The entry of a pipeline event."""
        return cls(topic_of(event), event.key, event.model_dump_json().encode(), event.document_id)

    def record(self) -> MongoDoc:
        """The entry as stored."""
        return {
            "_id": self.id,
            "topic": self.topic,
            "key": self.key,
            "value": self.value,
            "document_id": self.document_id,
            "created_at": self.created_at,
        }

    @classmethod
    def from_record(cls, doc: MongoDoc) -> Pending:
        """An entry as read back."""
        return cls(
            topic=str(doc["topic"]),
            key=bytes(doc["key"]),
            value=bytes(doc["value"]),
            document_id=doc.get("document_id"),
            id=str(doc["_id"]),
            created_at=doc["created_at"],
        )


class Outbox:
    """The events written with their changes and not yet acknowledged by Kafka."""

    def __init__(self, db: Database) -> None:
        self._entries = db[OUTBOX]

    async def add(self, entries: Sequence[Pending], session: AsyncClientSession) -> None:
        """Stores entries inside the caller's transaction."""
        if entries:
            await self._entries.insert_many([e.record() for e in entries], session=session)

    async def add_now(self, entries: Sequence[Pending]) -> None:
        """Stores entries on their own (nothing else changes with them)."""
        if entries:
            async with mongo_errors():
                await self._entries.insert_many([e.record() for e in entries])

    async def sent(self, entries: Sequence[Pending]) -> None:
        """Forgets entries Kafka has acknowledged."""
        if entries:
            async with mongo_errors():
                await self._entries.delete_many({"_id": {"$in": [e.id for e in entries]}})

    async def due(self, created_before: datetime, limit: int) -> list[Pending]:
        """The oldest entries written before `created_before`."""
        async with mongo_errors():
            cursor = (
                self._entries.find({"created_at": {"$lt": created_before}})
                .sort("created_at", ASCENDING)
                .limit(limit)
            )
            return [Pending.from_record(doc) async for doc in cursor]

    async def waiting_documents(self, document_ids: Sequence[str]) -> set[str]:
        """Which of these documents still have an event waiting here."""
        if not document_ids:
            return set()
        async with mongo_errors():
            found = await self._entries.distinct(
                "document_id", {"document_id": {"$in": list(document_ids)}}
            )
        return {str(d) for d in found}

    async def count(self) -> int:
        """How many events wait."""
        async with mongo_errors():
            return await self._entries.count_documents({})


async def publish(send: Send, entries: Sequence[Pending]) -> None:
    """Publishes entries, all at once; if Kafka fails, raises `ServiceUnavailable`."""
    await asyncio.gather(*(send(e.topic, e.key, e.value) for e in entries))


async def dispatch(outbox: Outbox, send: Send, entries: Sequence[Pending]) -> None:
    """Publishes entries and then forgets them; if Kafka fails, raises `ServiceUnavailable`
    and they stay stored for the relay."""
    if not entries:
        return
    await publish(send, entries)
    await outbox.sent(entries)


class EventSender:
    """Sends outbox entries at once, leaving them for the relay when Kafka is unavailable.

    Entries Kafka acknowledged are forgotten in the background, those acknowledged within
    `forget_wait_s` of each other in one delete: a caller does not wait for it. An entry the
    process ended before forgetting is sent again by the relay, which is harmless."""

    def __init__(
        self, outbox: Outbox, send: Send, timeout_s: float, forget_wait_s: float = 0.25
    ) -> None:
        self.outbox = outbox
        self._send = send
        self._timeout_s = timeout_s
        self._forgets: Coalescer[Pending, None] = Coalescer(
            self._forget_all, max_batch=512, max_wait_s=forget_wait_s
        )
        self._forgetting: set[asyncio.Task[None]] = set()

    async def send_now(self, entries: Sequence[Pending]) -> None:
        """Sends entries already stored (with their change), waiting `timeout_s` at most;
        never raises for Kafka."""
        if not entries:
            return
        try:
            await asyncio.wait_for(publish(self._send, entries), self._timeout_s)
        except (RetryableError, TimeoutError) as exc:
            OUTBOX_DEFERRED.inc(len(entries))
            reason = str(exc) or f"no answer from Kafka within {self._timeout_s:g} s"
            log.warning("%d event(s) left for the relay: %s", len(entries), reason)
            return
        forgetting = asyncio.create_task(self._forget(list(entries)))
        self._forgetting.add(forgetting)
        forgetting.add_done_callback(self._forgetting.discard)

    async def forgotten(self) -> None:
        """Waits until the entries acknowledged so far are forgotten (before the process
        ends; a reader of the outbox that must not see them)."""
        await asyncio.gather(*self._forgetting)

    async def _forget(self, entries: list[Pending]) -> None:
        try:
            await self._forgets.submit(entries)
        except RetryableError as exc:
            log.warning("%d event(s) sent but not forgotten (the relay sends them again): %s",
                        len(entries), exc)  # fmt: skip

    async def _forget_all(self, entries: list[Pending]) -> list[None]:
        await self.outbox.sent(entries)
        return [None] * len(entries)

    async def queue(self, entries: Sequence[Pending]) -> None:
        """Stores entries on their own, then sends them."""
        await self.outbox.add_now(entries)
        await self.send_now(entries)

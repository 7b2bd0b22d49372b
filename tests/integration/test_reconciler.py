"""The reconciler against the real MongoDB-protocol server: whose fault a stuck document is.

A restart counts against a document only when other documents moved on meanwhile; when nothing
moved (an outage), it does not, up to a larger bound that still fails a lone poison document.
Time is made to pass by moving the documents' last movement back, as the reconciler reads it.
"""

from __future__ import annotations

from datetime import timedelta

from infra.mongo.client import DOCUMENTS, OUTBOX, Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.indexes import ensure_indexes
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender, Outbox
from schemas.domain import Document, ParseStatus, utcnow
from services.recovery_service import ReconcilerService
from tests.factories import make_document

STALL_S = 10.0
MAX_REDRIVES = 2
MAX_UNCOUNTED = 4


class Recovery:
    """The reconciler over a fresh database, with the events it sends collected."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.documents = DocumentRepository(db)
        self.lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
        self.sent: list[str] = []

        async def send(topic: str, key: bytes, value: bytes) -> None:
            self.sent.append(key.decode())

        self.events = EventSender(Outbox(db), send, timeout_s=5)
        self.reconciler = ReconcilerService(
            self.documents,
            self.lifecycle,
            self.events,
            stall_after_s=STALL_S,
            max_redrives=MAX_REDRIVES,
            max_uncounted_redrives=MAX_UNCOUNTED,
        )

    async def stuck(self, name: str, status: ParseStatus = ParseStatus.EXTRACTING) -> str:
        """A document a stage took in a day ago and that has not moved since (its event
        gone)."""
        day_ago = utcnow() - timedelta(days=1)
        document = make_document(
            filename=name, source_key=name, parse_status=status, updated_at=day_ago,
            progressed_at=day_ago,
        )  # fmt: skip
        await self.lifecycle.create([document])
        await self.db[OUTBOX].delete_many({"document_id": document.id})
        return document.id

    async def flows(self, name: str) -> str:
        """A document that goes through the stages and ends indexed, now."""
        document = make_document(filename=name, source_key=name)
        await self.lifecycle.create([document])
        await self.db[OUTBOX].delete_many({"document_id": document.id})
        assert await self.documents.advance(document.id, 1, ParseStatus.EXTRACTING)
        assert await self.documents.record_chunking(
            document.id, 1, chunk_count=1, text_char_count=10, batch_count=1
        )
        assert await self.lifecycle.finish(document.id, 1) is not None
        return document.id

    async def redrive(self) -> int:
        """One pass of the reconciler; how many documents it restarted. (Their events, sent,
        are out of the outbox before the next pass, as minutes apart they are.)"""
        restarted = await self.reconciler.redrive_stalled()
        await self.events.forgotten()
        return restarted

    async def still_for(self, document_ids: list[str], seconds: float) -> None:
        """As if the documents had not moved for `seconds`."""
        await self.db[DOCUMENTS].update_many(
            {"_id": {"$in": document_ids}},
            {"$set": {"updated_at": utcnow() - timedelta(seconds=seconds)}},
        )

    async def get(self, document_id: str) -> Document:
        found = await self.documents.find(document_id)
        assert found is not None
        return found


def patience(restarts: int) -> float:
    """How long the reconciler waits before restarting a document restarted so often."""
    return STALL_S * 2.0**restarts


async def test_an_outage_does_not_use_up_the_documents_restarts(db: Database) -> None:
    await ensure_indexes(db)
    recovery = Recovery(db)
    stuck = [await recovery.stuck(f"stuck-{n}.txt") for n in range(3)]
    for restart in range(1, MAX_UNCOUNTED + 1):
        # Just short of the patience, nothing is restarted: it doubles with every restart,
        # counted or not.
        await recovery.still_for(stuck, patience(restart - 1) - 2)
        assert await recovery.redrive() == 0
        # Nothing else moves; the three are restarted in one pass, each time, and those
        # restarts are not progress that would make the others look at fault.
        await recovery.still_for(stuck, patience(restart - 1) + 1)
        assert await recovery.redrive() == 3
        for document_id in stuck:
            document = await recovery.get(document_id)
            assert document.parse_status is ParseStatus.QUEUED
            assert (document.redrives, document.uncounted_redrives) == (0, restart)
            assert document.generation == restart + 1
    # Well past `max_redrives`, none failed; at the larger bound they do, with a reason.
    assert len(recovery.sent) == 3 * MAX_UNCOUNTED
    await recovery.still_for(stuck, patience(MAX_UNCOUNTED) + 1)
    assert await recovery.redrive() == 3
    for document_id in stuck:
        document = await recovery.get(document_id)
        assert document.parse_status is ParseStatus.FAILED
        assert document.parse_error is not None
        assert f"did not resume after {MAX_UNCOUNTED} automatic restarts" in document.parse_error
        assert "no other document was moving either" in document.parse_error
        assert "re-index" in document.parse_error
    assert len(recovery.sent) == 3 * MAX_UNCOUNTED


async def test_a_poison_document_fails_at_max_redrives_while_others_flow(db: Database) -> None:
    await ensure_indexes(db)
    recovery = Recovery(db)
    poison = await recovery.stuck("poison.pdf", ParseStatus.CHUNKING)
    for restart in range(1, MAX_REDRIVES + 1):
        # Other documents go through the pipeline while the poison one does not move.
        await recovery.flows(f"flowing-{restart}.txt")
        await recovery.still_for([poison], patience(restart - 1) + 1)
        assert await recovery.redrive() == 1
        document = await recovery.get(poison)
        assert document.parse_status is ParseStatus.QUEUED
        assert (document.redrives, document.uncounted_redrives) == (restart, 0)
    await recovery.flows("flowing-last.txt")
    await recovery.still_for([poison], patience(MAX_REDRIVES) + 1)
    assert await recovery.redrive() == 1
    document = await recovery.get(poison)
    assert document.parse_status is ParseStatus.FAILED
    assert document.parse_error is not None
    assert f"did not resume after {MAX_REDRIVES} automatic restarts;" in document.parse_error
    assert "re-index" in document.parse_error
    # The reconciler giving up is not progress of the document's.
    assert document.progressed_at is not None
    assert document.progressed_at < utcnow() - timedelta(hours=1)
    # Each re-drive a run of its own, keyed anew (runs 2 to MAX_REDRIVES + 1).
    assert recovery.sent == [f"{poison}/{run}" for run in range(2, MAX_REDRIVES + 2)]


async def test_a_lone_poison_document_in_an_idle_system_fails_at_the_larger_bound(
    db: Database,
) -> None:
    await ensure_indexes(db)
    recovery = Recovery(db)
    # A document indexed before it stopped moving is no progress while it is stuck.
    done = await recovery.flows("indexed-long-ago.txt")
    two_days_ago = utcnow() - timedelta(days=2)
    await db[DOCUMENTS].update_one({"_id": done}, {"$set": {"progressed_at": two_days_ago}})
    poison = await recovery.stuck("poison.pdf")
    await recovery.still_for([poison], patience(0) + 1)
    for restart in range(1, MAX_UNCOUNTED + 1):
        assert await recovery.redrive() == 1
        document = await recovery.get(poison)
        assert (document.redrives, document.uncounted_redrives) == (0, restart)
        await recovery.still_for([poison], patience(restart) + 1)
    assert await recovery.redrive() == 1
    document = await recovery.get(poison)
    assert document.parse_status is ParseStatus.FAILED
    assert document.parse_error is not None
    assert f"did not resume after {MAX_UNCOUNTED} automatic restarts" in document.parse_error
    assert "no other document was moving either" in document.parse_error
    # A person's re-index starts both counts afresh.
    restarted, _ = await recovery.lifecycle.restart(poison)
    assert (restarted.redrives, restarted.uncounted_redrives) == (0, 0)

"""The Kafka adapter and GridFS storage against the real servers."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    TopicPartition,
)
from aiokafka.admin import AIOKafkaAdminClient
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from core.errors import NotFound, ServiceUnavailable
from devstack.launcher import LocalServices
from infra.kafka.client import (
    build_broker,
    ensure_topics,
    forbid_topic_auto_creation,
    kafka_dead_letter,
    kafka_publisher,
)
from infra.mongo import blob_store
from infra.mongo.blob_store import BlobStore, NewFile
from infra.mongo.broker_epoch import BrokerEpoch
from infra.mongo.client import Database
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.indexes import ensure_indexes
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings import Settings
from schemas.domain import Document, ExtractedDocument, ParseStatus, TextSegment
from schemas.events import DocumentUploaded
from schemas.topics import STAGE_INPUTS, dead_letter_topic
from tests.conftest import counted_database, settings_for, unique
from tests.factories import make_document
from workers.hosting import AssignmentTracker, Rewinder, rewind_past_the_end, subscribe_stage
from workers.ports import StageResult
from workers.runtime import Stage, StageRunner


async def test_topics_are_created_with_their_partitions(local_services: LocalServices) -> None:
    settings = settings_for(local_services)
    names = [unique("topic"), unique("topic")]
    await ensure_topics(settings.kafka, names)
    await ensure_topics(settings.kafka, names)  # idempotent
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        described = await admin.describe_topics(names)
    finally:
        await admin.close()
    assert [len(topic["partitions"]) for topic in described] == [6, 6]


async def test_unreachable_broker_is_a_retryable_error(local_services: LocalServices) -> None:
    settings = settings_for(local_services)
    settings.kafka.bootstrap_servers = "127.0.0.1:9"
    with pytest.raises(ServiceUnavailable):
        await ensure_topics(settings.kafka, ["anything"])


async def _read(topic: str, bootstrap: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=unique("read")
    )
    await consumer.start()
    records: list[Any] = []
    try:
        async with asyncio.timeout(30):
            while len(records) < count:
                batch = await consumer.getmany(timeout_ms=500)
                for messages in batch.values():
                    records.extend(messages)
    finally:
        await consumer.stop()
    return records


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    """Servers of this module's own, so that no other test's workers read its topics."""
    with LocalServices.on_free_ports(tmp_path_factory.mktemp("own")) as services:
        yield services


@pytest.mark.parametrize(
    ("stage", "batches"), [("extract", False), ("chunk", True)], ids=["one-by-one", "batches"]
)
async def test_a_stage_dead_letters_bad_messages_and_keeps_going(
    own_broker: LocalServices, db: Database, stage: str, batches: bool
) -> None:
    """Each read of a stage's messages (one at a time per consumer, or a batch worked at once):
    two stages' topics, so that each case reads only its own messages. About 10 s each."""
    settings = settings_for(own_broker)
    settings.kafka.group_prefix = unique("g")
    # A stage of its own: the stage's topics, read by a handler that records what it saw.
    await ensure_topics(settings.kafka, [STAGE_INPUTS[stage], dead_letter_topic(stage)])
    documents = DocumentRepository(db)
    lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
    kb = await KnowledgeBaseRepository(db).create("t", "KB", "", "en")
    good = make_document("t", kb.id)
    failing = make_document("t", kb.id)
    for document in (good, failing):
        await lifecycle.create([document])
    good_handled = asyncio.Event()

    async def handler(event: DocumentUploaded) -> StageResult:
        if event.document_id == failing.id:
            raise ValueError("a bug in the handler")
        good_handled.set()
        return StageResult()

    broker = build_broker(settings.kafka, "test")
    runner = StageRunner(
        Stage(stage, DocumentUploaded, handler, settings.stages.of(stage)),
        documents,
        kafka_publisher(broker, 10.0),
        kafka_dead_letter(broker, stage, 10.0),
        settings.ingest,
    )
    subscribe_stage(broker, settings, stage, runner, 8, batches=batches)

    def uploaded(document: Document) -> bytes:
        return (
            DocumentUploaded(
                tenant_id="t",
                kb_id=document.kb_id,
                document_id=document.id,
                generation=1,
                storage_key="k",
                filename="a.txt",
                content_type="text/plain",
            )
            .model_dump_json()
            .encode()
        )

    async with broker:
        await broker.start()
        await broker.publish(b"{not json", STAGE_INPUTS[stage], key=b"x")
        failing_message = uploaded(failing)
        await broker.publish(failing_message, STAGE_INPUTS[stage], key=failing.id.encode())
        await broker.publish(uploaded(good), STAGE_INPUTS[stage], key=good.id.encode())
        await asyncio.wait_for(good_handled.wait(), timeout=30)
        dead = await _read(dead_letter_topic(stage), settings.kafka.bootstrap_servers, 2)
    headers = [{k: v.decode() for k, v in record.headers} for record in dead]
    assert {h["stage"] for h in headers} == {stage}
    errors = sorted(h["error"] for h in headers)
    assert errors[0].startswith(f"internal error in the {stage} stage (ValueError)")
    assert errors[1].startswith("invalid message")
    assert {record.value for record in dead} == {b"{not json", failing_message}
    marked = await documents.find(failing.id)
    assert marked is not None
    assert marked.parse_status is ParseStatus.FAILED
    assert "internal error" in (marked.parse_error or "")


async def test_originals_and_extracted_text_round_trip(db: Database) -> None:
    blobs = BlobStore(db)
    upload = blobs.start_original("report.pdf", "doc_1")
    for piece in (b"%PDF-1.7 ", b"x" * 300_000, b" end"):
        await upload.write(piece)
    stored = await upload.finish()
    assert stored.size_bytes == 9 + 300_000 + 4
    assert len(stored.sha256) == 64
    assert (await blobs.read(stored.storage_key)).startswith(b"%PDF-1.7 xxx")
    extracted = ExtractedDocument(
        title="Report",
        segments=[TextSegment(text="page one", page=1), TextSegment(text="two", page=2)],
    )
    key = await blobs.put_extracted("doc_1", extracted)
    assert await blobs.get_extracted(key) == extracted
    await blobs.delete(stored.storage_key)
    await blobs.delete_extracted("doc_1")
    with pytest.raises(NotFound):
        await blobs.read(stored.storage_key)
    with pytest.raises(NotFound):
        await blobs.get_extracted(key)
    await blobs.delete(stored.storage_key)  # deleting twice is fine


async def test_an_aborted_upload_leaves_nothing(db: Database) -> None:
    blobs = BlobStore(db)
    upload = blobs.start_original("big.txt", "doc_2")
    await upload.write(b"y" * 600_000)
    await upload.abort()
    assert await db["originals.files"].count_documents({}) == 0
    assert await db["originals.chunks"].count_documents({}) == 0


async def test_a_batch_of_originals_is_stored_in_two_writes_as_gridfs_reads_it(
    local_services: LocalServices,
) -> None:
    async with counted_database(local_services) as (db, commands):
        blobs = BlobStore(db)
        large = bytes(range(256)) * 2_500  # 640,000 bytes: three GridFS chunks
        files = [
            NewFile(b"# one", "one.md", "doc_1"),
            NewFile(large, "large.md", "doc_2"),
            NewFile(b"", "empty.md", "doc_3"),
        ]
        stored = await blobs.store_originals(files)
        assert [name for name, _, _ in commands.sent] == ["insert", "insert"]
        for file, upload in zip(files, stored, strict=True):
            assert await blobs.read(upload.storage_key) == file.data
            assert upload.size_bytes == len(file.data)
            assert upload.sha256 == hashlib.sha256(file.data).hexdigest()
        await blobs.delete(stored[1].storage_key)
        assert await db["originals.chunks"].count_documents({}) == 1  # "# one"'s only chunk
        assert await blobs.store_originals([]) == []


async def test_storing_a_file_does_not_scan_what_is_stored(local_services: LocalServices) -> None:
    # An unfiltered query scans the whole collection on the local MongoDB server: storing must
    # cost the same with a thousand files stored as with none.
    async with counted_database(local_services) as (db, commands):
        blobs = BlobStore(db)
        stored = await blobs.store_original(b"first", "a.txt", "doc_1")
        key = await blobs.put_extracted("doc_1", ExtractedDocument(title="a", segments=[]))
        gridfs_reads = [
            (collection, query)
            for name, collection, query in commands.sent
            if name == "find" and collection.endswith((".files", ".chunks"))
        ]
        assert gridfs_reads == []
        assert await blobs.read(stored.storage_key) == b"first"
        assert (await blobs.get_extracted(key)).title == "a"
        indexes = [index async for index in await db["originals.chunks"].list_indexes()]
        assert any(index.get("unique") and "files_id" in index["key"] for index in indexes)


async def _group_with_a_commit(settings: Settings, position: int) -> tuple[str, dict[str, Any]]:
    """A new one-partition topic, and the options of a consumer group that committed
    `position` in it (as a broker that lost its messages takes a commit from before)."""
    topic = unique("topic")
    await ensure_topics(settings.kafka, [topic], partitions=1)
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka.bootstrap_servers,
        "group_id": unique("group"),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 1500,
        "heartbeat_interval_ms": 500,
        "fetch_max_wait_ms": 50,
    }
    stale = AIOKafkaConsumer(topic, **options)
    await stale.start()
    try:
        async with asyncio.timeout(20):
            while not stale.assignment():
                await asyncio.sleep(0.1)
        await stale.commit({TopicPartition(topic, 0): position})
    finally:
        await stale.stop()
    return topic, options


async def test_a_consumer_past_its_partitions_end_reads_it_again_from_the_start(
    local_services: LocalServices,
) -> None:
    """A group whose committed position is past the partition's end (a broker that lost its
    messages in a restart, then took a commit from before it) still gets the new messages."""
    settings = settings_for(local_services)
    topic, options = await _group_with_a_commit(settings, 12)

    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    consumer = AIOKafkaConsumer(topic, **options)
    await producer.start()
    await consumer.start()
    try:
        for n in range(3):
            await producer.send_and_wait(topic, f"event {n}".encode(), partition=0)
        # Nothing comes while the position is past the end.
        assert await consumer.getmany(timeout_ms=2000) == {}
        assert await rewind_past_the_end(consumer, "test") == 1
        assert await _values(consumer, 3) == [b"event 0", b"event 1", b"event 2"]
        # At the end now: nothing more to rewind.
        assert await rewind_past_the_end(consumer, "test") == 0
    finally:
        await consumer.stop()
        await producer.stop()


async def test_a_new_broker_epoch_makes_a_stage_read_its_partitions_again_from_the_start(
    local_services: LocalServices, db: Database
) -> None:
    """A broker that lost its messages took a commit from before (position 1) and then got
    three new events: the position falls inside the new log, so event 0 is skipped, until the
    relay's new epoch makes the stage read the partition again from its start."""
    settings = settings_for(local_services)
    topic, options = await _group_with_a_commit(settings, 1)

    epoch = BrokerEpoch(db)
    rewinder = Rewinder("test", epoch)
    await rewinder.start()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    consumer = AIOKafkaConsumer(topic, **options)
    await producer.start()
    await consumer.start()

    try:
        for n in range(3):
            await producer.send_and_wait(topic, f"event {n}".encode(), partition=0)
        # Event 0 is behind the position.
        assert await _values(consumer, 2) == [b"event 1", b"event 2"]
        assert await rewinder.check([consumer]) == 0  # same epoch, not past the end
        await epoch.begin()
        assert await rewinder.check([consumer]) == 1
        assert await _values(consumer, 3) == [b"event 0", b"event 1", b"event 2"]
        assert await rewinder.check([consumer]) == 0  # once per epoch
    finally:
        await consumer.stop()
        await producer.stop()


async def test_partitions_handed_over_after_a_new_broker_epoch_are_read_from_the_start(
    local_services: LocalServices, db: Database
) -> None:
    """The stage sees the new epoch while one of its consumers is (re)joining the group with
    no partition: when the partition comes, at a position committed in the broker's previous
    life (1), it is read from the start too, not from there (event 0 was skipped for good)."""
    settings = settings_for(local_services)
    topic, options = await _group_with_a_commit(settings, 1)

    epoch = BrokerEpoch(db)
    assignments = AssignmentTracker("test")
    rewinder = Rewinder("test", epoch, assignments)
    await rewinder.start()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    consumer = AIOKafkaConsumer(**options)
    consumer.subscribe([topic], listener=assignments)
    await producer.start()
    try:
        for n in range(3):
            await producer.send_and_wait(topic, f"event {n}".encode(), partition=0)
        await epoch.begin()
        assert await rewinder.check([consumer]) == 0  # nothing assigned yet
        await consumer.start()
        async with asyncio.timeout(20):
            while not consumer.assignment():
                await asyncio.sleep(0.1)
        assert await rewinder.check([consumer]) == 1
        assert await _values(consumer, 3) == [b"event 0", b"event 1", b"event 2"]
        assert await rewinder.check([consumer]) == 0  # once for each time it is handed over
    finally:
        await consumer.stop()
        await producer.stop()


class _Handings(ConsumerRebalanceListener):  # type: ignore[misc]
    """One consumer's handings in order, passed on to the worker's tracker."""

    def __init__(self, tracker: AssignmentTracker) -> None:
        self.tracker = tracker
        self.handings: list[set[TopicPartition]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.tracker.on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.handings.append(set(assigned))
        await self.tracker.on_partitions_assigned(assigned)


async def test_a_group_that_rejoined_before_its_topic_came_back_gets_its_partitions(
    own_broker: LocalServices, db: Database
) -> None:
    """Found by the freeze tests: a worker's three consumers rejoined their group while the
    restarted broker had no topics yet and were handed nothing; once the relay had created the
    topics and begun a new epoch, none got a partition back (the local broker does not
    rebalance a group on its leader's rejoin), and the new messages waited for ever. With the
    new epoch, the stage has them join again as new members and reads every message. About
    15 s; it restarts this module's broker."""
    forbid_topic_auto_creation()  # as every Ragline process does (`build_broker`)
    settings = settings_for(own_broker)
    topic = unique("topic")
    await ensure_topics(settings.kafka, [topic])
    epoch = BrokerEpoch(db)
    tracker = AssignmentTracker("rejoin-test")
    rewinder = Rewinder("rejoin-test", epoch, tracker)
    await rewinder.start()
    group = unique("group")
    listeners = [_Handings(tracker) for _ in range(3)]
    consumers = [
        AIOKafkaConsumer(
            bootstrap_servers=settings.kafka.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=1500,
            heartbeat_interval_ms=500,
            fetch_max_wait_ms=50,
            metadata_max_age_ms=settings.kafka.metadata_max_age_ms,
        )
        for _ in listeners
    ]
    read: set[bytes] = set()

    async def keep_reading(consumer: AIOKafkaConsumer) -> None:
        while True:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                read.update(record.value for record in records)

    for consumer, listener in zip(consumers, listeners, strict=True):
        consumer.subscribe([topic], listener=listener)
        await consumer.start()
    readers = [asyncio.create_task(keep_reading(consumer)) for consumer in consumers]
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        async with asyncio.timeout(20):
            while sum(len(consumer.assignment()) for consumer in consumers) < 6:
                await asyncio.sleep(0.1)
        before = [len(listener.handings) for listener in listeners]
        # Restarted while the consumers' process is frozen (the loop is blocked), as the
        # freeze tests do with SIGSTOP.
        own_broker.restart("kafka")
        # Each consumer rejoins the new broker's group, which has no topic yet: nothing.
        async with asyncio.timeout(30):
            while not all(
                any(not handed for handed in listener.handings[count:])
                for listener, count in zip(listeners, before, strict=True)
            ):
                await asyncio.sleep(0.1)
        # The relay's part: the topics again, then the new epoch.
        await ensure_topics(settings.kafka, [topic])
        await epoch.begin()
        await producer.start()
        sent = {f"message {n}".encode() for n in range(24)}
        for value in sorted(sent):
            await producer.send_and_wait(topic, value, key=value)
        # Every message read, and every partition held again (on a busy machine a consumer
        # may miss a heartbeat and the group hand its partitions out once more meanwhile).
        async with asyncio.timeout(30):
            while not sent <= read or sum(len(c.assignment()) for c in consumers) < 6:
                await rewinder.check(consumers)
                await asyncio.sleep(0.5)
    finally:
        for reader in readers:
            reader.cancel()
        for consumer in consumers:
            await consumer.stop()
        await producer.stop()


async def test_a_commit_acknowledged_before_a_crash_survives_it(
    own_broker: LocalServices,
) -> None:
    # Transactions are committed back to back; the database is SIGKILLed mid-stream. Every
    # commit it acknowledged must be there after its restart (an upload answered 202 must not
    # vanish because the server crashed a moment later).
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        own_broker.mongo_url, serverSelectionTimeoutMS=2_000
    )
    collection = client[unique("crash")]["documents"]
    acknowledged: list[int] = []

    async def commit_forever() -> None:
        n = 0
        while True:
            async with client.start_session() as session, await session.start_transaction():
                await collection.insert_one({"_id": n, "outbox": [n]}, session=session)
            acknowledged.append(n)
            n += 1

    writer = asyncio.create_task(commit_forever())
    try:
        async with asyncio.timeout(30):
            while len(acknowledged) < 200:
                await asyncio.sleep(0.05)
        await asyncio.to_thread(own_broker.process("mongodb").kill)
        with pytest.raises(PyMongoError):  # the server is gone
            await writer
    finally:
        writer.cancel()
        await client.close()
    await asyncio.to_thread(own_broker.start_server, "mongodb")
    reopened: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(own_broker.mongo_url)
    try:
        stored = {
            doc["_id"]
            async for doc in reopened[collection.database.name]["documents"].find({}, {"_id": 1})
        }
    finally:
        await reopened.close()
    assert set(acknowledged) <= stored, sorted(set(acknowledged) - stored)


async def test_extracted_text_a_retry_found_already_stored_is_tried_again(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After the server went away, the driver retried a piece's write that the server had stored
    # before it went: GridFS finds that piece there. That is an outage to try again, not a
    # broken file, and the partial file is taken back out.
    await ensure_indexes(db)  # as every service does at start-up (GridFS's unique index)
    blobs = BlobStore(db)
    file_id = ObjectId()
    await db["extracted.chunks"].insert_one({"files_id": file_id, "n": 0, "data": b"x"})

    def stream_on(bucket: Any, filename: str, document_id: str) -> Any:
        return bucket.open_upload_stream_with_id(file_id, filename, metadata={})

    monkeypatch.setattr(blob_store, "_upload_stream", stream_on)
    extracted = ExtractedDocument(title="", segments=[TextSegment(text="page one", page=1)])
    with pytest.raises(ServiceUnavailable, match="retried"):
        await blobs.put_extracted("doc_retried", extracted)
    assert await db["extracted.chunks"].count_documents({"files_id": file_id}) == 0
    monkeypatch.undo()
    key = await blobs.put_extracted("doc_retried", extracted)
    assert await blobs.get_extracted(key) == extracted


async def _values(consumer: AIOKafkaConsumer, count: int) -> list[bytes]:
    """The values of the next `count` messages the consumer reads (20 s at most)."""
    values: list[bytes] = []
    async with asyncio.timeout(20):
        while len(values) < count:
            batches = await consumer.getmany(timeout_ms=500)
            values += [record.value for records in batches.values() for record in records]
    return values

"""Every document indexed exactly once, or failed with a reason: checked in Mongo and Qdrant.

This module runs a stack with servers of its own, so that it can read and replay its Kafka
topics, and at the end stop it and open the vector store itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import RecordMetadata

from core.filters import chunks_where
from infra.kafka.client import consumer_options
from infra.mongo.blob_store import BlobStore
from infra.mongo.client import DOCUMENTS, ORIGINALS_BUCKET, OUTBOX, Database, connect
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.vectorstore.edge import EdgeVectorStore
from schemas.domain import file_source_key, new_document_id, utcnow
from schemas.events import RecordPublished
from schemas.topics import ALL_TOPICS, RECORDS_INGEST, dead_letter_topic
from tests.conftest import FIXTURES, RunningPipeline, own_stack, unique
from tests.e2e.client import WAIT_S, Api
from tests.factories import make_document

pytestmark = pytest.mark.e2e

# Points each document must have in the vector store when the module ends (0: deleted).
EXPECTED_POINTS: dict[str, tuple[str, int]] = {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of this module's own: its Kafka topics are read and replayed whole, and its
    vector store is opened once the stack is stopped."""
    with own_stack(tmp_path_factory.mktemp("exactly-once")) as running:
        yield running


@pytest.fixture
async def db(stack: RunningPipeline) -> AsyncIterator[Database]:
    """The stack's own MongoDB database, to look at directly."""
    client = connect(stack.settings().mongo)
    yield client[stack.database]
    await client.close()


def _expect(document: dict[str, Any], points: int) -> None:
    EXPECTED_POINTS[document["id"]] = ("default", points)


async def _originals(db: Database, document_id: str) -> int:
    return await db[f"{ORIGINALS_BUCKET}.files"].count_documents(
        {"metadata.document_id": document_id}
    )


async def test_identical_bytes_return_the_existing_document(api: Api, db: Database) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "crazyones.pdf").read_bytes()
    first = await api.upload(kb["id"], "crazyones.pdf", data)
    done = await api.wait_final(kb["id"], first["id"])
    again = await api.upload(kb["id"], "renamed-copy.pdf", data, expect=200)
    assert again["id"] == first["id"]
    assert again["parse_status"] == "indexed"
    assert (await api.documents(kb["id"]))["items"] == [again]
    assert await _originals(db, first["id"]) == 1
    assert (await api.kb(kb["id"]))["document_count"] == 1
    _expect(done, done["chunk_count"])


async def test_reindexing_runs_again_without_duplicating_anything(api: Api) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    first = await api.wait_final(kb["id"], (await api.upload(kb["id"], "nhn.pdf", data))["id"])
    forced = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        params={"reindex": "true"},
        files={"file": ("nhn.pdf", data)},
        headers=api.auth,
    )
    assert forced.status_code == 202
    assert forced.json()["id"] == first["id"]
    assert forced.json()["parse_status"] == "queued"
    second = await api.wait_final(kb["id"], first["id"])
    endpoint = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{first['id']}/reindex", headers=api.auth
    )
    assert endpoint.status_code == 202
    third = await api.wait_final(kb["id"], first["id"])
    for run in (second, third):
        assert run["parse_status"] == "indexed"
        assert run["chunk_count"] == first["chunk_count"]
    chunks = await api.chunks(kb["id"], first["id"])
    assert [c["chunk_index"] for c in chunks] == list(range(first["chunk_count"]))
    assert all(c["active"] for c in chunks)
    counted = await api.kb(kb["id"])
    assert (counted["document_count"], counted["chunk_count"]) == (1, first["chunk_count"])
    _expect(third, third["chunk_count"])


async def test_a_new_version_replaces_the_old_with_no_gap_and_no_overlap(api: Api) -> None:
    kb = await api.create_kb()
    old_text = "# Returns\n\nThe returns window for kayaks is thirty days. " * 40
    new_text = "# Returns\n\nThe returns window for kayaks is sixty days now. " * 60
    old = await api.wait_final(
        kb["id"], (await api.upload(kb["id"], "returns.md", old_text.encode()))["id"]
    )
    answers: list[set[str]] = []
    stop = asyncio.Event()

    async def keep_searching() -> None:
        while not stop.is_set():
            hits = await api.search([kb["id"]], "returns window for kayaks", top_k=10)
            answers.append({hit["document_id"] for hit in hits})
            await asyncio.sleep(0.02)

    searcher = asyncio.create_task(keep_searching())
    new = await api.upload(kb["id"], "returns.md", new_text.encode())
    assert new["id"] != old["id"]
    assert new["version"] == old["version"] + 1
    # While the new version is processed, the old one is still listed and searchable.
    listed = {d["id"] for d in (await api.documents(kb["id"]))["items"]}
    assert listed == {old["id"], new["id"]}
    done = await api.wait_final(kb["id"], new["id"])
    # A few answers more, each asked after the new version was indexed.
    answered_by_then = len(answers)
    async with asyncio.timeout(30):
        while len(answers) < answered_by_then + 3:
            await asyncio.sleep(0.02)
    stop.set()
    await searcher
    assert done["parse_status"] == "indexed"
    assert len(answers) > 10
    assert all(len(answer) == 1 for answer in answers), "an answer showed both or neither"
    assert answers[0] == {old["id"]}
    assert answers[-1] == {new["id"]}
    gone = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{old['id']}", headers=api.auth
    )
    assert gone.status_code == 404
    counted = await api.kb(kb["id"])
    assert (counted["document_count"], counted["chunk_count"]) == (1, done["chunk_count"])
    _expect(old, 0)
    _expect(done, done["chunk_count"])


async def _topic_messages(bootstrap: str, document_id: str) -> list[tuple[str, bytes, bytes]]:
    """Every message the pipeline sent about a document: (topic, key, value)."""
    topics = [t for t in ALL_TOPICS if "dead-letter" not in t and t != RECORDS_INGEST]
    consumer = AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, group_id=unique("replay"),
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    await consumer.start()
    found = []
    try:
        idle = 0
        while idle < 4:
            batch = await consumer.getmany(timeout_ms=500)
            idle = 0 if batch else idle + 1
            for records in batch.values():
                for record in records:
                    if json.loads(record.value).get("document_id") == document_id:
                        found.append((record.topic, record.key, record.value))
    finally:
        await consumer.stop()
    return found


async def test_replaying_every_event_changes_nothing(api: Api, stack: RunningPipeline) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    done = await api.wait_final(kb["id"], (await api.upload(kb["id"], "nhn.pdf", data))["id"])
    bootstrap = stack.settings().kafka.bootstrap_servers
    messages = await _topic_messages(bootstrap, done["id"])
    assert {topic for topic, _, _ in messages} == {
        "documents.uploaded.v1", "documents.extracted.v1", "chunks.ready.v1", "chunks.embedded.v1",
    }  # fmt: skip
    before_embedded = await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")
    before_handled = await api.stage_messages()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for _ in range(2):
            for topic, key, value in messages:
                await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()
    # Every replayed message handled (each stage counts the messages it takes, whatever it did
    # with them) before anything is compared.
    async with asyncio.timeout(WAIT_S):
        while await api.stage_messages() < before_handled + 2 * len(messages):
            await asyncio.sleep(0.1)
    after = await api.document(kb["id"], done["id"])
    assert after["parse_status"] == "indexed"
    assert after["chunk_count"] == done["chunk_count"]
    assert after["stage_started_at"]["indexed"] == done["stage_started_at"]["indexed"]
    chunks = await api.chunks(kb["id"], done["id"])
    assert len(chunks) == done["chunk_count"]
    counted = await api.kb(kb["id"])
    assert (counted["document_count"], counted["chunk_count"]) == (1, done["chunk_count"])
    embedded = await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")
    assert embedded == before_embedded
    _expect(done, done["chunk_count"])


async def test_delete_removes_points_and_the_stored_original(api: Api, db: Database) -> None:
    kb = await api.create_kb()
    done = await api.wait_final(
        kb["id"], (await api.upload(kb["id"], "memo.txt", b"The vault code changes weekly."))["id"]
    )
    assert await _originals(db, done["id"]) == 1
    await api.delete(kb["id"], done["id"])
    assert await _originals(db, done["id"]) == 0
    assert await db[DOCUMENTS].count_documents({"_id": done["id"]}) == 0
    assert await api.search([kb["id"]], "vault code") == []
    _expect(done, 0)


async def test_hard_delete_removes_the_kb_and_all_it_holds(api: Api, db: Database) -> None:
    kb = await api.create_kb()
    docs = [
        await api.wait_final(kb["id"], (await api.upload(kb["id"], name, text))["id"])
        for name, text in (("a.txt", b"Alpha facts about otters."), ("b.md", b"# Beta\nBeavers."))
    ]
    response = await api.http.delete(
        f"/api/v1/knowledge-bases/{kb['id']}", params={"hard": "true"}, headers=api.auth
    )
    assert response.status_code == 204
    assert (
        await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)
    ).status_code == 404
    assert await db[DOCUMENTS].count_documents({"kb_id": kb["id"]}) == 0
    for document in docs:
        assert await _originals(db, document["id"]) == 0
        _expect(document, 0)
    assert await api.search([kb["id"]], "otters beavers") == []


async def test_a_malformed_message_is_dead_lettered_and_the_worker_goes_on(
    api: Api, stack: RunningPipeline
) -> None:
    bootstrap = stack.settings().kafka.bootstrap_servers
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("documents.uploaded.v1", b"\x00 not an event", key=b"junk")
    finally:
        await producer.stop()
    kb = await api.create_kb()
    after = await api.upload(kb["id"], "after.txt", b"Processing continues after bad input.")
    assert (await api.wait_final(kb["id"], after["id"]))["parse_status"] == "indexed"
    consumer = AIOKafkaConsumer(
        dead_letter_topic("extract"), bootstrap_servers=bootstrap, group_id=unique("dlq"),
        auto_offset_reset="earliest",
    )  # fmt: skip
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), timeout=20)
    finally:
        await consumer.stop()
    assert record.value == b"\x00 not an event"
    assert dict(record.headers)["error"].decode().startswith("invalid message")
    _expect(await api.document(kb["id"], after["id"]), 1)


async def _lost(
    db: Database,
    kb_id: str,
    name: str,
    text: bytes,
    still_for: timedelta = timedelta(minutes=1),
    **fields: Any,
) -> str:
    """A document accepted through the lifecycle whose event is then lost (as when the broker
    loses its messages), last moved `still_for` ago."""
    document_id = new_document_id()
    original = await BlobStore(db).store_original(text, name, document_id)
    last_moved = utcnow() - still_for
    document = make_document(
        "default", kb_id, id=document_id, filename=name, title=name,
        source_key=file_source_key(name), storage_key=original.storage_key,
        sha256=original.sha256, size_bytes=original.size_bytes, updated_at=last_moved,
        **fields,
    )  # fmt: skip
    await DocumentLifecycle(db.client, db, Outbox(db)).create([document])
    # Before the relay's grace period ends, its event disappears.
    await db[OUTBOX].delete_many({"document_id": document_id})
    return document_id


async def test_documents_whose_events_were_lost_are_redriven_or_failed(
    api: Api, db: Database
) -> None:
    kb = await api.create_kb()
    lost = await _lost(db, kb["id"], "tides.txt", b"Spring tides follow the new moon.")
    # One the reconciler already restarted as often as it may (whether or not other documents
    # moved meanwhile), and still for longer than its patience (3 s doubled nine times): it
    # fails with a reason.
    hopeless = await _lost(
        db, kb["id"], "stuck.txt", b"Never moves.", timedelta(hours=1),
        redrives=3, uncounted_redrives=6,
    )  # fmt: skip
    # With nothing moving for the stack's stall deadline (3 s), the reconciler acts.
    final = await api.wait_final(kb["id"], lost)
    assert final["parse_status"] == "indexed"
    stored = await db[DOCUMENTS].find_one({"_id": lost})
    assert stored is not None
    assert stored["generation"] == 2
    assert stored["redrives"] + stored["uncounted_redrives"] == 1
    hits = await api.search([kb["id"]], "when do spring tides come")
    assert [h["document_id"] for h in hits][:1] == [lost]
    failed = await api.wait_final(kb["id"], hopeless)
    assert failed["parse_status"] == "failed"
    assert "did not resume after 9 automatic restarts" in failed["parse_error"]
    assert "re-index" in failed["parse_error"]
    relay = api.worker_metrics("relay")
    assert await api.metric(relay, "ragline_redrives_total") >= 2
    # Re-indexing it is a person's decision, and starts a fresh count.
    restarted = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{hopeless}/reindex", headers=api.auth
    )
    assert restarted.status_code == 202
    assert (await api.wait_final(kb["id"], hopeless))["parse_status"] == "indexed"
    listed = await api.kb(kb["id"])
    assert listed["document_count"] == 2


async def test_the_document_list_filters_by_status_and_pages(api: Api) -> None:
    kb = await api.create_kb()
    ids = []
    for n in range(5):
        uploaded = await api.upload(
            kb["id"], f"note-{n}.txt", f"Note number {n} about tides.".encode()
        )
        ids.append(uploaded["id"])
    failed = await api.upload(
        kb["id"], "locked.pdf", (FIXTURES / "encrypted-file.pdf").read_bytes()
    )
    for document_id in [*ids, failed["id"]]:
        _expect(await api.wait_final(kb["id"], document_id), 1)
    _expect(failed, 0)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await api.documents(kb["id"], **params)
        assert len(page["items"]) <= 2
        seen.extend(d["id"] for d in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [failed["id"], *reversed(ids)]
    indexed = await api.documents(kb["id"], status="indexed", limit=50)
    assert {d["id"] for d in indexed["items"]} == set(ids)
    only_failed = await api.documents(kb["id"], status="failed")
    assert [d["id"] for d in only_failed["items"]] == [failed["id"]]
    bad = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        params={"status": "sleeping"},
        headers=api.auth,
    )
    assert bad.status_code == 422


def _group_of(stack: RunningPipeline, stage: str) -> str:
    """A stage's consumer group in this stack (whose workers run with a group prefix of their
    own, which `stack.settings()` does not carry)."""
    prefix = stack.pipeline.env["RAGLINE_KAFKA__GROUP_PREFIX"]
    kafka = stack.settings().kafka.model_copy(update={"group_prefix": prefix})
    return str(consumer_options(kafka, stage)["group_id"])


async def _wait_committed(bootstrap: str, group: str, sent: Sequence[RecordMetadata]) -> None:
    """Returns once the consumer group has committed an offset past each sent message: its
    stage handled every one of them to the end (a stage commits a message after its handler
    returned). The partitions are named: the local broker drops the connection when asked for
    all of a group's offsets (and its end offsets are no measure of anything)."""
    partitions = sorted({TopicPartition(m.topic, m.partition) for m in sent})
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(60):
            while True:
                committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
                # An offset commits the messages before it (-1: nothing committed yet).
                if all(
                    committed[TopicPartition(m.topic, m.partition)].offset > m.offset for m in sent
                ):
                    return
                await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def _records_outcomes(api: Api) -> dict[str, float]:
    """The records messages the records worker handled so far, by outcome (tries that were
    retried are left out: a slow moment of MongoDB may make one)."""
    counted = dict.fromkeys(("ok", "skipped", "failed"), 0.0)
    for line in (await api.http.get(api.worker_metrics("records"))).text.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith("ragline_stage_messages_total{") and 'stage="records"' in head:
            for outcome in counted:
                if f'outcome="{outcome}"' in head:
                    counted[outcome] += float(value)
    return counted


async def test_texts_batches_and_connector_records(api: Api, stack: RunningPipeline) -> None:
    kb = await api.create_kb()
    text = await api.text(
        kb["id"], {"title": "Runbook", "content": "Restart the ingest pods first."}
    )
    form = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/text",
        data={"title": "Form note", "content": "Sent as form fields."},
        headers=api.auth,
    )
    assert form.status_code == 202
    records = [
        {
            "external_id": f"kb-{n}",
            "title": f"Article {n}",
            "content": f"Article {n} explains topic {n}.",
            "url": f"https://help.example.com/{n}",
            "metadata": {"lang": "en"},
        }
        for n in range(60)
    ]
    results = await api.batch(kb["id"], records)
    assert [r["outcome"] for r in results] == ["created"] * 60
    for result in results:
        await api.wait_final(kb["id"], result["document_id"])
    for document_id in (text["id"], form.json()["id"]):
        await api.wait_final(kb["id"], document_id)
    embedded = await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")

    # The same batch again costs nothing.
    again = await api.batch(kb["id"], records)
    assert [r["outcome"] for r in again] == ["unchanged"] * 60
    assert [r["document_id"] for r in again] == [r["document_id"] for r in results]
    # Three changed records become new versions that replace the old ones.
    records[5]["content"] = "Article 5 now explains the new refund rules."
    records[6]["title"] = "Article six"
    records[7]["metadata"] = {"lang": "de"}
    changed = await api.batch(kb["id"], records)
    outcomes = [r["outcome"] for r in changed]
    assert outcomes.count("updated") == 3
    assert outcomes.count("unchanged") == 57
    for result in changed:
        if result["outcome"] == "updated":
            await api.wait_final(kb["id"], result["document_id"])
    hits = await api.search([kb["id"]], "refund rules", top_k=3)
    assert hits[0]["document_id"] == changed[5]["document_id"]
    assert all(hit["document_id"] != results[5]["document_id"] for hit in hits)
    assert (await api.kb(kb["id"]))["document_count"] == 62

    # Connectors can publish the same records to Kafka directly.
    bootstrap = stack.settings().kafka.bootstrap_servers
    handled = await _records_outcomes(api)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    sent: list[RecordMetadata] = []
    try:
        for record in [
            *records[:2],
            {"external_id": "kb-new", "title": "New", "content": "Kafka-borne record."},
        ]:
            event = RecordPublished.model_validate(
                {"tenant_id": "default", "kb_id": kb["id"], "record": record}
            )
            sent.append(
                await producer.send_and_wait(
                    RECORDS_INGEST, event.model_dump_json().encode(), key=event.key
                )
            )
    finally:
        await producer.stop()
    # Once the records worker has committed past all three, nothing more comes of them: two
    # unchanged records skipped, one new document, and no second one.
    await _wait_committed(bootstrap, _group_of(stack, "records"), sent)
    after = await _records_outcomes(api)
    assert {outcome: after[outcome] - handled[outcome] for outcome in after} == {
        "ok": 1,
        "skipped": 2,
        "failed": 0,
    }
    assert (await api.kb(kb["id"]))["document_count"] == 63
    newest = (await api.documents(kb["id"], limit=1))["items"][0]
    assert newest["external_id"] == "kb-new"
    await api.wait_final(kb["id"], newest["id"])
    # Four changed records and one new: only their chunks were embedded.
    assert (
        await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")
        <= embedded + 5
    )
    too_many = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/batch",
        json={"records": [{"external_id": str(n), "content": "x"} for n in range(1001)]},
        headers=api.auth,
    )
    assert too_many.status_code == 422
    assert "records" in too_many.json()["detail"]


async def test_unchanged_content_is_never_embedded_twice(api: Api) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    first = await api.wait_final(kb["id"], (await api.upload(kb["id"], "nhn.pdf", data))["id"])
    await api.delete(kb["id"], first["id"])
    embedded = await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")
    hits = await api.metric(
        api.worker_metrics("embed"), 'ragline_embedding_cache_total{result="hit"}'
    )
    other_kb = await api.create_kb()
    again = await api.wait_final(
        other_kb["id"], (await api.upload(other_kb["id"], "nhn.pdf", data))["id"]
    )
    assert again["parse_status"] == "indexed"
    assert (
        await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total") == embedded
    )
    new_hits = await api.metric(
        api.worker_metrics("embed"), 'ragline_embedding_cache_total{result="hit"}'
    )
    assert new_hits - hits == again["chunk_count"]
    _expect(first, 0)
    _expect(again, again["chunk_count"])


async def test_the_vector_store_holds_exactly_what_mongo_says(
    stack: RunningPipeline, db: Database
) -> None:
    # Last in this module: stop the stack and open its vector store directly.
    documents = {doc["_id"]: doc async for doc in db[DOCUMENTS].find({})}
    stack.pipeline.stop()
    store = EdgeVectorStore(Path(stack.run_dir) / "vectors", 384)
    await store.ensure_collection()
    try:
        assert EXPECTED_POINTS
        for document_id, (tenant, points) in EXPECTED_POINTS.items():
            assert await store.count(chunks_where(tenant, document_id=document_id)) == points, (
                document_id
            )
        for document_id, record in documents.items():
            if record["parse_status"] == "indexed":
                stored = await store.count(
                    chunks_where(record["tenant_id"], document_id=document_id)
                )
                assert stored == record["chunk_count"], document_id
                active = await store.count(
                    chunks_where(record["tenant_id"], document_id=document_id, active=True)
                )
                assert active == stored
    finally:
        await store.close()

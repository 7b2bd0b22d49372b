"""Nothing accepted is lost: uploads while Kafka is down are accepted and indexed once it is
back; a broker restart that loses every message in flight is recovered without a person."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from infra.mongo.client import connect
from infra.mongo.outbox import Outbox
from tests.conftest import RunningPipeline, own_stack
from tests.e2e.client import Api
from tests.freezing import freeze

# They stop and start the stand-in servers themselves.
pytestmark = [pytest.mark.e2e, pytest.mark.local_servers]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of this module's own: its broker is stopped and started again. Its stall deadline
    outlasts a restarted broker's consumers rejoining on a busy machine (with the usual 3 s,
    the reconciler may use up a document's restarts while they rejoin)."""
    env = {"RAGLINE_INGEST__STALL_AFTER_S": "10"}
    with own_stack(tmp_path_factory.mktemp("outbox"), env) as running:
        yield running


async def _outbox_empty(stack: RunningPipeline) -> None:
    """Waits until the relay has sent every event the outbox held (a minute at most)."""
    client = connect(stack.settings().mongo)
    try:
        outbox = Outbox(client[stack.database])
        async with asyncio.timeout(60):
            while await outbox.count():
                await asyncio.sleep(0.2)
    finally:
        await client.close()


async def _all_indexed(api: Api, kb_id: str, ids: list[str]) -> None:
    for document_id in ids:
        final = await api.wait_final(kb_id, document_id)
        assert final["parse_status"] == "indexed", (final["parse_error"], final)


async def test_uploads_while_kafka_is_down_are_accepted_and_indexed_when_it_returns(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb()
    before = await api.upload(kb["id"], "before.txt", b"The ferry leaves at nine.")
    await _all_indexed(api, kb["id"], [before["id"]])

    stack.services.stop_server("kafka")
    accepted = [
        await api.upload(kb["id"], f"note-{n}.txt", f"Note {n}: the lighthouse {n}.".encode())
        for n in range(3)
    ]
    records = await api.batch(
        kb["id"], [{"external_id": "faq-1", "title": "FAQ", "content": "Tickets at the pier."}]
    )
    # Accepted into the outbox (not failed): each is indexed once the broker is back, below.
    assert all(doc["parse_status"] == "queued" for doc in accepted)
    relay = api.worker_metrics("relay")
    assert await api.metric(f"{stack.url}/metrics", "ragline_outbox_deferred_total") >= 4

    # A new, empty broker: the relay creates the topics and sends what waited.
    stack.services.start_server("kafka")
    ids = [doc["id"] for doc in accepted] + [r["document_id"] for r in records]
    await _all_indexed(api, kb["id"], ids)
    # The relay sent what waited and forgot it. Its documents may be indexed before that: the
    # API's own producer still held the messages it gave up waiting for and delivers them once
    # the broker is back (each stage takes a message twice as once).
    await _outbox_empty(stack)
    async with asyncio.timeout(10):
        while await api.metric(relay, "ragline_outbox_relayed_total") < 4:
            await asyncio.sleep(0.1)
    assert (await api.kb(kb["id"]))["document_count"] == 5
    # Each once: as many chunks in the store as the documents say.
    for document_id in ids:
        document = await api.document(kb["id"], document_id)
        assert len(await api.chunks(kb["id"], document_id)) == document["chunk_count"]
    hits = await api.search([kb["id"]], "where are tickets sold")
    assert hits[0]["document_id"] == records[0]["document_id"]


async def test_a_broker_restart_losing_messages_in_flight_is_recovered(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb()
    # The extract worker is stopped, so that the uploads' events wait in the broker, unread,
    # whatever the machine's speed (running, the pipeline could finish them before the
    # restart, and nothing would be lost). It starts again on the new broker.
    extract = stack.pipeline.workers("extract")[0]
    extract.stop()
    try:
        uploaded = [
            await api.upload(
                kb["id"], f"page-{n}.txt", (f"Section {n} on harbour rules. " * 400).encode()
            )
            for n in range(6)
        ]
        # Every event is in the broker: sent at once, or (a broker restarted moments ago may
        # refuse a send) by the relay from the outbox, which is empty.
        await _outbox_empty(stack)
        # The broker dies with the events in it and comes back empty.
        stack.services.restart("kafka")
    finally:
        extract.start()
    ids = [doc["id"] for doc in uploaded]
    await _all_indexed(api, kb["id"], ids)
    for document_id in ids:
        document = await api.document(kb["id"], document_id)
        assert len(await api.chunks(kb["id"], document_id)) == document["chunk_count"]
    assert (await api.kb(kb["id"]))["document_count"] == 6
    relay = api.worker_metrics("relay")
    assert await api.metric(relay, "ragline_redrives_total") >= 1


async def test_a_stage_frozen_across_a_broker_restart_takes_all_its_partitions_back(
    api: Api, stack: RunningPipeline
) -> None:
    # Found by the chaos soak: an extract worker frozen (SIGSTOP) while the broker restarted
    # consumed only some of the topic's partitions once resumed, and the documents keyed to the
    # others stayed queued, re-drives and all.
    kb = await api.create_kb()
    extract = stack.pipeline.workers("extract")[0]
    assert extract.process is not None
    try:
        await freeze(extract.process.pid)
        stack.services.restart("kafka")
    finally:
        os.kill(extract.process.pid, signal.SIGCONT)
    # Enough documents that every partition of the topic holds some.
    uploaded = [
        await api.upload(
            kb["id"], f"rule-{n}.txt", f"Harbour rule {n}: moor at berth {n}.".encode()
        )
        for n in range(24)
    ]
    await _all_indexed(api, kb["id"], [doc["id"] for doc in uploaded])

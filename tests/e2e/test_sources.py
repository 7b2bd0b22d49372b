"""Records by external id, and full syncs of a source over HTTP and Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from schemas.domain import Record
from schemas.events import RecordPublished, SyncMarker
from schemas.topics import RECORDS_INGEST
from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


async def _versions(api: Api, kb_id: str, external_id: str) -> list[dict[str, Any]]:
    page = await api.documents(kb_id, external_id=external_id)
    return list(page["items"])


async def _found(api: Api, kb_id: str, query: str) -> set[str]:
    return {hit["document_id"] for hit in await api.search([kb_id], query, top_k=10)}


async def _sync(api: Api, kb_id: str, source: str, records: list[dict[str, Any]]) -> Any:
    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/documents/sync",
        json={"source": source, "records": records},
        headers=api.auth,
    )
    assert response.status_code == 202, response.text
    return response.json()


async def test_a_record_is_found_replaced_and_deleted_by_its_external_id(api: Api) -> None:
    kb = await api.create_kb()
    results = await api.batch(
        kb["id"],
        [
            {
                "external_id": "kb-101",
                "title": "Ports",
                "content": "Port 8443 serves the admin UI.",
            },
            {"external_id": "kb-102", "title": "Disks", "content": "Disks are checked at dawn."},
        ],
    )
    first = results[0]["document_id"]
    await api.wait_final(kb["id"], first)
    assert [d["id"] for d in await _versions(api, kb["id"], "kb-101")] == [first]
    assert await _versions(api, kb["id"], "kb-999") == []

    path = f"/api/v1/knowledge-bases/{kb['id']}/documents/{first}"
    replaced = await api.http.put(
        path,
        json={"title": "Ports", "content": "Port 9443 now serves the admin console."},
        headers=api.auth,
    )
    assert replaced.status_code == 202, replaced.text
    second = replaced.json()
    assert second["external_id"] == "kb-101"
    assert second["version"] == 2
    await api.wait_final(kb["id"], second["id"])
    # The new version took the old one's place: one version listed, the new text found.
    assert [d["id"] for d in await _versions(api, kb["id"], "kb-101")] == [second["id"]]
    hits = await api.search([kb["id"]], "which port serves the admin console", top_k=1)
    assert hits[0]["document_id"] == second["id"]
    assert "9443" in hits[0]["chunk_text"]
    # The same content again changes nothing.
    same = await api.http.put(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{second['id']}",
        json={"title": "Ports", "content": "Port 9443 now serves the admin console."},
        headers=api.auth,
    )
    assert same.status_code == 200
    assert same.json()["id"] == second["id"]

    upload = await api.upload(kb["id"], "notes.txt", b"A file, not a record.")
    refused = await api.http.put(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{upload['id']}",
        json={"content": "x"},
        headers=api.auth,
    )
    assert refused.status_code == 409
    assert "upload a new version" in refused.json()["detail"]
    await api.delete(kb["id"], second["id"])
    assert await _versions(api, kb["id"], "kb-101") == []


async def test_a_full_sync_makes_a_source_exactly_its_records(api: Api) -> None:
    kb = await api.create_kb()
    other = await api.batch(
        kb["id"], [{"external_id": "elsewhere-1", "content": "Fog horns sound every minute."}]
    )
    upload = await api.upload(kb["id"], "manual.txt", b"The winch takes two people.")
    first = await _sync(
        api,
        kb["id"],
        "helpdesk",
        [
            {"external_id": "a", "title": "A", "content": "Lockers open with the blue key."},
            {"external_id": "b", "title": "B", "content": "The canteen closes at four."},
            {"external_id": "c", "title": "C", "content": "Parking permits renew in May."},
        ],
    )
    assert [r["outcome"] for r in first["results"]] == ["created"] * 3
    assert first["removed"] == []
    ids = {r["external_id"]: r["document_id"] for r in first["results"]}
    for document_id in ids.values():
        assert (await api.wait_final(kb["id"], document_id))["source"] == "helpdesk"

    second = await _sync(
        api,
        kb["id"],
        "helpdesk",
        [
            {"external_id": "a", "title": "A", "content": "Lockers open with the blue key."},
            {"external_id": "b", "title": "B", "content": "The canteen now closes at six."},
            {"external_id": "d", "title": "D", "content": "Bicycles go in the east shed."},
        ],
    )
    outcomes = {r["external_id"]: r["outcome"] for r in second["results"]}
    assert outcomes == {"a": "unchanged", "b": "updated", "d": "created"}
    assert second["removed"] == [ids["c"]]
    # At once: c is gone, and b answers with exactly one of its versions: the old text until
    # its new one is in (on a fast pipeline the new one may already be).
    assert ids["c"] not in await _found(api, kb["id"], "when do parking permits renew")
    new_b = next(r["document_id"] for r in second["results"] if r["external_id"] == "b")
    found = await _found(api, kb["id"], "when does the canteen close")
    assert len({ids["b"], new_b} & found) == 1, found
    await api.wait_final(kb["id"], new_b)
    assert new_b in await _found(api, kb["id"], "when does the canteen close")
    assert ids["b"] not in await _found(api, kb["id"], "when does the canteen close")
    # Other sources and uploads are not the sync's business.
    assert (await api.document(kb["id"], other[0]["document_id"]))["source"] is None
    assert (await api.document(kb["id"], upload["id"]))["parse_status"] != "deleting"
    gone = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{ids['c']}", headers=api.auth
    )
    assert gone.status_code == 404
    assert (await api.kb(kb["id"]))["document_count"] == 5

    missing_id = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/sync",
        json={"source": "helpdesk", "records": [{"content": "no id"}]},
        headers=api.auth,
    )
    assert missing_id.status_code == 422
    bad_source = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/sync",
        json={"source": "Help Desk!", "records": []},
        headers=api.auth,
    )
    assert bad_source.status_code == 422


async def test_a_sync_run_over_kafka_ends_with_its_closing_message(api: Api) -> None:
    kb = await api.create_kb()
    source = "wiki-export"

    def record(run: str, external_id: str, text: str) -> RecordPublished:
        return RecordPublished(
            tenant_id="default",
            kb_id=kb["id"],
            record=Record(external_id=external_id, title=external_id, content=text),
            sync=SyncMarker(source=source, run=run),
        )

    def end(run: str, count: int) -> RecordPublished:
        return RecordPublished(
            tenant_id="default",
            kb_id=kb["id"],
            sync=SyncMarker(source=source, run=run, complete=True, record_count=count),
        )

    async def publish(*events: RecordPublished) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=api.running.settings().kafka.bootstrap_servers
        )
        await producer.start()
        try:
            for event in events:
                await producer.send_and_wait(
                    RECORDS_INGEST, event.model_dump_json().encode(), event.key
                )
        finally:
            await producer.stop()

    run1, run2 = unique("run"), unique("run")
    await publish(
        record(run1, "p1", "Page one covers the boiler."),
        record(run1, "p2", "Page two covers the chimney."),
        end(run1, 2),
    )

    async def listed() -> dict[str, dict[str, Any]]:
        items = (await api.documents(kb["id"]))["items"]
        return {d["external_id"]: d for d in items if d["parse_status"] != "deleting"}

    async with asyncio.timeout(60):
        while set(await listed()) != {"p1", "p2"}:
            await asyncio.sleep(0.3)
    await publish(record(run2, "p1", "Page one covers the boiler."), end(run2, 1))
    async with asyncio.timeout(60):
        while set(await listed()) != {"p1"}:
            await asyncio.sleep(0.3)
    survivor = (await listed())["p1"]
    assert (await api.wait_final(kb["id"], survivor["id"]))["parse_status"] == "indexed"

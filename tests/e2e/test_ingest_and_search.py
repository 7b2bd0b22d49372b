"""Upload over HTTP, through Kafka and the four stage workers, into search, on real servers."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import docx
import pytest

from tests.conftest import FIXTURES, RunningPipeline
from tests.e2e.client import WAIT_S, Api
from workers.chunk.chunking import SEGMENT_SEPARATOR, chunk_document, normalize_whitespace
from workers.extract.extractors import extract

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(running_pipeline: RunningPipeline) -> RunningPipeline:
    """The session's stack with the packaged model: the one end-to-end run through the real embed
    worker."""
    return running_pipeline


def _docx_with_table() -> bytes:
    document = docx.Document()
    document.add_heading("Router models", level=1)
    document.add_paragraph("The table below lists the radios of each model.")
    table = document.add_table(rows=3, cols=3)
    rows = [
        ("Model", "Radio", "Notes"),
        ("Zephyr-9", "Wi-Fi 6E tri-band", "Supports mesh backhaul over 6 GHz"),
        ("Aurora-2", "Wi-Fi 5 dual-band", "Discontinued in 2024"),
    ]
    for row, values in zip(table.rows, rows, strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("Firmware updates are published monthly.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


async def test_pdf_and_docx_are_indexed_and_found(api: Api) -> None:
    kb = await api.create_kb("Product docs")
    pdf = await api.upload(kb["id"], "crazyones.pdf", (FIXTURES / "crazyones.pdf").read_bytes())
    manual = await api.upload(kb["id"], "routers.docx", _docx_with_table())
    assert pdf["parse_status"] == "queued"
    assert pdf["id"].startswith("doc_")
    assert pdf["size_bytes"] == (FIXTURES / "crazyones.pdf").stat().st_size

    done_pdf = await api.wait_final(kb["id"], pdf["id"])
    done_docx = await api.wait_final(kb["id"], manual["id"])
    for done in (done_pdf, done_docx):
        assert done["parse_status"] == "indexed", done
        assert done["chunk_count"] >= 1
        assert done["chunks_embedded"] == done["chunk_count"]
        assert done["text_char_count"] > 0
        assert set(done["stage_started_at"]) >= {
            "queued",
            "extracting",
            "chunking",
            "embedding",
            "indexing",
            "indexed",
        }

    hits = await api.search([kb["id"]], "here's to the crazy ones, the misfits and rebels")
    assert hits[0]["document_id"] == pdf["id"]
    assert "crazy ones" in hits[0]["chunk_text"]
    assert hits[0]["source_name"] == "crazyones.pdf"
    assert hits[0]["kb_id"] == kb["id"]

    table_hits = await api.search([kb["id"]], "Which router supports mesh backhaul over 6 GHz?")
    assert table_hits[0]["document_id"] == manual["id"]
    assert (
        "Zephyr-9 | Wi-Fi 6E tri-band | Supports mesh backhaul over 6 GHz"
        in (table_hits[0]["chunk_text"])
    )

    refreshed = (await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)).json()
    assert refreshed["document_count"] == 2
    assert refreshed["chunk_count"] == done_pdf["chunk_count"] + done_docx["chunk_count"]


async def test_multi_page_pdf_streams_through_in_parts(api: Api) -> None:
    # The stack extracts 4,000-character parts: this 19-page PDF arrives in several, and its
    # chunks must come out exactly as chunking the whole text at once makes them.
    kb = await api.create_kb("Hydro")
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    document = await api.wait_final(kb["id"], (await api.upload(kb["id"], "nhn.pdf", data))["id"])
    expected, length = chunk_document(extract(data, "nhn.pdf"))
    assert document["parse_status"] == "indexed"
    assert document["chunk_count"] == len(expected)
    assert document["text_char_count"] == length
    hits = await api.search([kb["id"]], "National Hydro Network data model", top_k=10)
    assert hits
    # Neighbouring chunks come merged into one passage without their overlap: each passage
    # is a stretch of the document's text that starts where its first chunk starts.
    full = SEGMENT_SEPARATOR.join(
        normalize_whitespace(s.text) for s in extract(data, "nhn.pdf").segments
    )
    by_index = {chunk.chunk_index: chunk for chunk in expected}
    for hit in hits:
        assert hit["document_id"] == document["id"]
        first = by_index[hit["chunk_index"]]
        assert hit["chunk_text"].startswith(first.text)
        assert full[first.start :].startswith(hit["chunk_text"])


async def test_a_record_without_a_title_is_named_by_its_external_id(api: Api) -> None:
    kb = await api.create_kb()
    (result,) = await api.batch(
        kb["id"], [{"external_id": "pstore.conf.5", "content": "Configures systemd-pstore."}]
    )
    document = await api.wait_final(kb["id"], result["document_id"])
    assert document["parse_status"] == "indexed"
    assert document["title"] == "pstore.conf.5"
    (chunk,) = await api.chunks(kb["id"], result["document_id"])
    assert chunk["context"] == "pstore.conf.5"
    (hit,) = await api.search([kb["id"]], "systemd pstore", top_k=1)
    assert hit["document_title"] == "pstore.conf.5"


async def test_deleted_document_never_comes_back(api: Api) -> None:
    kb = await api.create_kb()
    text = b"The warehouse in Rotterdam ships orders every Tuesday and Friday."
    uploaded = await api.upload(kb["id"], "shipping.txt", text)
    await api.wait_final(kb["id"], uploaded["id"])
    assert (await api.search([kb["id"]], "When does Rotterdam ship orders?"))[0]["document_id"] == (
        uploaded["id"]
    )

    response = await api.http.delete(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{uploaded['id']}", headers=api.auth
    )
    assert response.status_code == 204
    for _ in range(10):
        assert await api.search([kb["id"]], "When does Rotterdam ship orders?") == []
        await asyncio.sleep(0.3)
    missing = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{uploaded['id']}", headers=api.auth
    )
    assert missing.status_code == 404
    again = await api.http.delete(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{uploaded['id']}", headers=api.auth
    )
    assert again.status_code == 404
    refreshed = (await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)).json()
    assert (refreshed["document_count"], refreshed["chunk_count"]) == (0, 0)


async def test_delete_while_the_pipeline_runs_leaves_nothing_behind(api: Api) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    skipped_before = await api.stage_messages("skipped")
    uploaded = await api.upload(kb["id"], "nhn.pdf", data)
    # Deleted once a stage has it (12 pages, extracted in parts of 4,000 characters).
    async with asyncio.timeout(WAIT_S):
        while (await api.document(kb["id"], uploaded["id"]))["parse_status"] == "queued":
            await asyncio.sleep(0.05)
    response = await api.http.delete(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/{uploaded['id']}", headers=api.auth
    )
    assert response.status_code == 204
    # The pipeline still had it: a later stage meets a message of the deleted document and
    # drops it (had it been indexed before the delete, no stage would skip anything).
    async with asyncio.timeout(WAIT_S):
        while await api.stage_messages("skipped") == skipped_before:
            assert await api.search([kb["id"]], "National Hydro Network data model") == []
            await asyncio.sleep(0.1)
    for _ in range(5):
        assert await api.search([kb["id"]], "National Hydro Network data model") == []
    counted = await api.kb(kb["id"])
    assert (counted["document_count"], counted["chunk_count"]) == (0, 0)


async def test_encrypted_pdf_fails_with_an_actionable_reason(api: Api) -> None:
    kb = await api.create_kb()
    data = (FIXTURES / "encrypted-file.pdf").read_bytes()
    document = await api.wait_final(
        kb["id"], (await api.upload(kb["id"], "locked.pdf", data))["id"]
    )
    assert document["parse_status"] == "failed"
    assert "encrypted" in document["parse_error"]
    assert await api.search([kb["id"]], "anything at all") == []


async def test_unsupported_type_is_415_listing_supported_types(api: Api) -> None:
    kb = await api.create_kb()
    body = await api.upload(kb["id"], "slides.pptx", b"PK\x03\x04 not supported", expect=415)
    for extension in (".pdf", ".docx", ".txt", ".md", ".csv"):
        assert extension in body["detail"]
    listed = await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}/documents", headers=api.auth)
    assert listed.json()["items"] == []


async def test_oversized_upload_is_413(api: Api, stack: RunningPipeline) -> None:
    kb = await api.create_kb()
    limit = int(stack.pipeline.env["RAGLINE_INGEST__MAX_UPLOAD_MB"]) * 1024 * 1024
    body = await api.upload(kb["id"], "big.txt", b"a" * (limit + 1), expect=413)
    assert "upload limit" in body["detail"]

    async def chunked() -> AsyncIterator[bytes]:
        # No Content-Length: refused while streaming, as soon as the limit is crossed.
        boundary = b"xyzboundary"
        yield b"--" + boundary + b'\r\nContent-Disposition: form-data; name="file"; '
        yield b'filename="big.md"\r\nContent-Type: text/markdown\r\n\r\n'
        for _ in range(limit // (256 * 1024) + 2):
            yield b"b" * (256 * 1024)
        yield b"\r\n--" + boundary + b"--\r\n"

    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        content=chunked(),
        headers={**api.auth, "Content-Type": "multipart/form-data; boundary=xyzboundary"},
    )
    assert response.status_code == 413
    listed = await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}/documents", headers=api.auth)
    assert listed.json()["items"] == []


async def test_upload_without_a_file_field_is_422(api: Api) -> None:
    kb = await api.create_kb()
    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        files={"attachment": ("a.txt", b"hello")},
        headers=api.auth,
    )
    assert response.status_code == 422
    assert "'file'" in response.json()["detail"]


async def test_search_needs_the_internal_secret(api: Api) -> None:
    body = {"tenant_id": "default", "kb_ids": ["kb_x"], "query": "q", "top_k": 2}
    for headers in ({}, {"X-Internal-Secret": "wrong"}, {"X-Internal-Secret": ""}):
        response = await api.http.post(
            "/api/v1/internal/knowledge/search", json=body, headers=headers
        )
        assert response.status_code == 401, headers


async def test_disabled_kb_drops_out_of_search_and_comes_back(api: Api) -> None:
    kb = await api.create_kb()
    uploaded = await api.upload(kb["id"], "faq.md", b"# FAQ\nRefunds are paid within 14 days.")
    await api.wait_final(kb["id"], uploaded["id"])
    assert await api.search([kb["id"]], "How long do refunds take?")
    disabled = await api.http.delete(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)
    assert disabled.status_code == 200
    assert disabled.json()["status"] == "disabled"
    assert await api.search([kb["id"]], "How long do refunds take?") == []
    enabled = await api.http.patch(
        f"/api/v1/knowledge-bases/{kb['id']}", json={"status": "active"}, headers=api.auth
    )
    assert enabled.json()["status"] == "active"
    assert await api.search([kb["id"]], "How long do refunds take?")


async def test_admin_api_needs_an_admin_token_of_the_same_tenant(api: Api) -> None:
    kb = await api.create_kb()
    assert (await api.http.get("/api/v1/knowledge-bases")).status_code == 401
    bad = await api.http.get("/api/v1/knowledge-bases", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"] == "Bearer"

    user = await api.http.post(
        "/api/v1/tokens",
        json={"name": "reader", "role": "user", "user_id": "reader"},
        headers=api.auth,
    )
    assert user.status_code == 201
    user_headers = {"Authorization": f"Bearer {user.json()['token']}"}
    # A user may see the KBs but not administer them.
    assert (await api.http.get("/api/v1/knowledge-bases", headers=user_headers)).status_code == 200
    created = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "mine"}, headers=user_headers
    )
    assert created.status_code == 403

    other = await _other_tenant_admin(api)
    other_headers = {"Authorization": f"Bearer {other}"}
    for method, path in (
        ("GET", f"/api/v1/knowledge-bases/{kb['id']}"),
        ("PATCH", f"/api/v1/knowledge-bases/{kb['id']}"),
        ("DELETE", f"/api/v1/knowledge-bases/{kb['id']}"),
        ("GET", f"/api/v1/knowledge-bases/{kb['id']}/documents"),
    ):
        response = await api.http.request(method, path, headers=other_headers, json={})
        assert response.status_code == 404, (method, path)
    listed = await api.http.get("/api/v1/knowledge-bases", headers=other_headers)
    assert listed.json()["items"] == []
    # Searching another tenant's KB finds nothing.
    assert await api.search([kb["id"]], "anything", tenant_id="tenant-b") == []


async def _other_tenant_admin(api: Api) -> str:
    from infra.mongo.client import connect
    from infra.mongo.token_repository import TokenRepository
    from infra.settings.mongo import MongoSettings
    from schemas.domain import Role

    settings = MongoSettings(url=api.running.mongo_url, database=api.running.database)
    client = connect(settings)
    tokens = TokenRepository(client[settings.database], "", "default")
    _, token = await tokens.issue("tenant-b", Role.ADMIN, "tenant b admin")
    await client.close()
    return token


async def test_kb_validation_errors_name_the_field(api: Api) -> None:
    response = await api.http.post("/api/v1/knowledge-bases", json={"name": "  "}, headers=api.auth)
    assert response.status_code == 422
    assert "name" in response.json()["detail"]
    response = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "x", "colour": "red"}, headers=api.auth
    )
    assert response.status_code == 422
    assert "colour" in response.json()["detail"]


async def test_health_readiness_and_metrics(api: Api, stack: RunningPipeline) -> None:
    assert (await api.http.get("/healthz")).json() == {"status": "ok"}
    ready = await api.http.get("/readyz")
    assert ready.status_code == 200
    # The stack's settings name the model its store's live generation holds.
    dependencies = ("mongodb", "kafka", "vector_store", "redis", "embedding_model")
    assert ready.json()["checks"] == dict.fromkeys(dependencies, "ok")
    kb = await api.create_kb()
    uploaded = await api.upload(kb["id"], "note.txt", b"Metrics are scraped every fifteen seconds.")
    await api.wait_final(kb["id"], uploaded["id"])
    await api.search([kb["id"]], "scrape interval")
    exposition = (await api.http.get("/metrics")).text
    assert 'ragline_documents_processed_total{stage="index"}' in exposition
    assert "ragline_search_latency_seconds_count" in exposition
    assert 'ragline_stage_duration_seconds_count{stage="index"}' in exposition
    # What the API made while starting is out of the garbage collector's walks (a full walk of
    # it took 130-280 ms), and every collection's pause is measured.
    frozen = next(
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith("ragline_gc_frozen_objects ")
    )
    assert frozen > 100_000
    assert 'ragline_gc_pause_seconds_count{generation="0"}' in exposition
    # Every worker serves its own metrics.
    for stage in ("extract", "chunk", "embed"):
        worker = stack.pipeline.workers(stage)[0]
        port = worker.env["RAGLINE_METRICS_PORT"]
        text = (await api.http.get(f"http://127.0.0.1:{port}/metrics")).text
        assert f'ragline_documents_processed_total{{stage="{stage}"}}' in text
        assert f'ragline_stage_duration_seconds_count{{stage="{stage}"}}' in text
    embed_port = stack.pipeline.workers("embed")[0].env["RAGLINE_METRICS_PORT"]
    embed_metrics = (await api.http.get(f"http://127.0.0.1:{embed_port}/metrics")).text
    assert "ragline_chunks_embedded_total" in embed_metrics
    assert "ragline_consumer_lag_messages{partition=" in embed_metrics

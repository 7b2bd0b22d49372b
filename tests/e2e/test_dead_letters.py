"""Dead letters over HTTP: what the pipeline gave up on is listed per tenant with its error,
and re-driving it runs the work again once its cause is fixed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Record, Role
from schemas.events import RecordPublished
from tests.conftest import unique
from tests.e2e.client import Api, publish_record

pytestmark = pytest.mark.e2e


async def _letters(api: Api, token: str | None = None, **params: Any) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else api.auth
    response = await api.http.get("/api/v1/dead-letters", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def _wait_letter(api: Api, **match: Any) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            for letter in await _letters(api):
                if all(letter.get(key) == value for key, value in match.items()):
                    return letter
            await asyncio.sleep(0.3)


async def _outsider(api: Api) -> str:
    """An admin of another tenant (made as the token CLI does)."""
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(unique("other"), Role.ADMIN, "outsider")
    await client.close()
    return secret


async def test_a_record_refused_for_an_unknown_audience_is_redriven_once_it_exists(
    api: Api,
) -> None:
    kb = await api.create_kb()
    crew = unique("crew").lower()
    external_id = unique("shift-notes")
    event = RecordPublished(
        tenant_id="default",
        kb_id=kb["id"],
        record=Record(
            external_id=external_id, title="Shift notes", content="The night crew meets at ten."
        ),
        governance={"visibility_mode": "shared", "audience_tags": [crew]},
    )
    await publish_record(api.running, event)

    letter = await _wait_letter(api, stage="records", kb_id=kb["id"])
    assert f"unknown audience: {crew}" in letter["error"]
    assert letter["redriven_at"] is None
    assert (await api.documents(kb["id"]))["items"] == []
    # Another tenant's admin neither sees nor re-drives it.
    outsider = await _outsider(api)
    assert [x["id"] for x in await _letters(api, outsider)] == []
    foreign = await api.http.post(
        f"/api/v1/dead-letters/{letter['id']}/redrive",
        headers={"Authorization": f"Bearer {outsider}"},
    )
    assert foreign.status_code == 404
    assert foreign.json()["detail"]

    made = await api.http.put(
        f"/api/v1/audiences/{crew}", json={"description": "Night crew"}, headers=api.auth
    )
    assert made.status_code in (200, 201), made.text
    redriven = await api.http.post(f"/api/v1/dead-letters/{letter['id']}/redrive", headers=api.auth)
    assert redriven.status_code == 202, redriven.text
    assert redriven.json()["stage"] == "records"
    async with asyncio.timeout(60):
        while not (items := (await api.documents(kb["id"]))["items"]):
            await asyncio.sleep(0.3)
    final = await api.wait_final(kb["id"], items[0]["id"])
    assert final["parse_status"] == "indexed"
    assert final["external_id"] == external_id
    assert final["audience_tags"] == [crew]
    assert letter["id"] not in [x["id"] for x in await _letters(api)]
    again = [x for x in await _letters(api, include_redriven=True) if x["id"] == letter["id"]]
    assert again[0]["redriven_at"] is not None


async def test_a_failed_document_is_listed_and_redriven_through_a_new_run(api: Api) -> None:
    kb = await api.create_kb()
    broken = await api.upload(kb["id"], "broken.pdf", b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog")
    failed = await api.wait_final(kb["id"], broken["id"])
    assert failed["parse_status"] == "failed"
    letter = await _wait_letter(api, document_id=broken["id"])
    assert letter["stage"] == "extract"
    assert letter["kb_id"] == kb["id"]
    assert letter["error"] == failed["parse_error"]
    only_extract = await _letters(api, stage="extract")
    assert letter["id"] in [x["id"] for x in only_extract]
    assert letter["id"] not in [x["id"] for x in await _letters(api, stage="embed")]

    everything = await api.http.post("/api/v1/dead-letters/redrive", headers=api.auth)
    assert everything.status_code == 202, everything.text
    assert {"id": letter["id"], "stage": "extract", "document_id": broken["id"]} in (
        everything.json()["items"]
    )
    # A new run of the same bytes fails the same way, and says so again.
    rerun = await api.wait_final(kb["id"], broken["id"])
    assert rerun["parse_status"] == "failed"
    assert rerun["parse_error"] == failed["parse_error"]
    missing = await api.http.post("/api/v1/dead-letters/dl_nothing/redrive", headers=api.auth)
    assert missing.status_code == 404
    unknown_stage = await api.http.get(
        "/api/v1/dead-letters", params={"stage": "nowhere"}, headers=api.auth
    )
    assert unknown_stage.status_code == 422

"""Keyword scores are the tenant's own: a term's IDF is counted over the tenant's chunks, so
another tenant's documents, full of the very words a tenant asks for, and a KB deleted since,
move none of its rankings or scores.

The other tenant's KB holds 50 documents: the test's last part shows that 10 documents of
the tenant's own, made of the same words, change every answer's scores, so 50 that leaked
into the tenant's statistics would too (the test once used 500, most of its time).

Cost: about 80 short records through the pipeline on the hashed embedder and 120 searches; in
a full run about 36 s of one worker with 500 other documents; alone, 12 s with 50 (6 s of it
starting the shared stack).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e

# The tenant's handbook: twenty passages, each on its own matter.
HANDBOOK = [
    "Reset the router by holding its recessed button for ten seconds.",
    "The warehouse dock opens at six and closes at noon on Saturdays.",
    "Expense reports above five hundred euros need a director's signature.",
    "Badge readers at the east entrance log every door opening.",
    "Laptop batteries are replaced free of charge within two years.",
    "The cafeteria serves vegetarian soup every Tuesday and Thursday.",
    "Parking permits renew each January through the facilities portal.",
    "Printer toner is ordered by the office manager, never by staff.",
    "Fire drills happen quarterly; assemble at the north car park.",
    "Travel bookings go through the agency portal at least two weeks ahead.",
    "The VPN client must be updated before connecting from abroad.",
    "Overtime is paid at one and a half times the hourly rate.",
    "Visitors sign the register at reception and wear a paper badge.",
    "Server room access requires two-factor authentication and an escort.",
    "Holiday requests are approved by the team lead within three days.",
    "Company phones are wiped remotely when reported lost or stolen.",
    "The library lends technical books for up to four weeks.",
    "Desk plants are watered by the facilities team on Mondays.",
    "Payroll runs on the twenty-fifth; payslips arrive by email.",
    "The gym in the basement is open to staff from seven to nine.",
]
QUERIES = [
    "reset router button",
    "warehouse dock saturday",
    "expense report signature",
    "badge reader door",
    "laptop battery replaced",
    "vegetarian soup cafeteria",
    "parking permit renew",
    "printer toner order",
    "fire drill car park",
    "travel booking agency",
    "vpn client abroad",
    "overtime hourly rate",
    "visitors reception badge",
    "server room escort",
    "holiday request approval",
    "phone wiped lost",
    "library technical books",
    "desk plants watered",
    "payroll payslips email",
    "gym basement open",
]
# Every term the tenant asks for, which the other tenant's documents are full of.
CROWD_TEXT = " ".join(QUERIES)
CROWD = 50


async def _admin_elsewhere(api: Api, tenant: str) -> Api:
    """An admin of another tenant."""
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(tenant, Role.ADMIN, "crowd admin")
    await client.close()
    return Api(api.http, api.running, secret)


async def _fill(api: Api, kb_id: str, texts: list[str]) -> None:
    """Publishes the texts as records and waits until every one of them is indexed."""
    for start in range(0, len(texts), 250):
        records = [
            {"external_id": f"r{i}", "title": f"Note {i}", "content": text}
            for i, text in enumerate(texts[start : start + 250], start)
        ]
        await api.batch(kb_id, records)
    # Each text is one chunk. One request a second: the polls share the stand-in MongoDB with
    # the pipeline they wait for. The bound allows a loaded machine a second a document (the
    # pipeline indexes about four a second on a quiet one).
    try:
        async with asyncio.timeout(60 + len(texts)):
            while True:
                counted = await api.kb(kb_id)
                arrived = min(counted["document_count"], counted["chunk_count"]) >= len(texts)
                if arrived and not await _in_flight(api, kb_id):
                    break
                await asyncio.sleep(1.0)
    except TimeoutError:
        failed = (await api.documents(kb_id, status="failed", limit=5))["items"]
        raise AssertionError(f"not all indexed: {await api.kb(kb_id)}; failed: {failed}") from None
    failed = (await api.documents(kb_id, status="failed", limit=5))["items"]
    assert failed == [], failed


async def _in_flight(api: Api, kb_id: str) -> bool:
    """Whether any document of the KB is still on its way through the pipeline."""
    for status in ("queued", "extracting", "chunking", "embedding", "indexing"):
        if (await api.documents(kb_id, status=status, limit=1))["items"]:
            return True
    return False


async def _hard_delete(api: Api, kb_id: str) -> None:
    """Deletes a KB for good. A delete that the database did not finish within the request's
    bound (hundreds of documents, on a loaded machine) is finished by deleting again, as the
    API says (503 with `Retry-After`)."""
    interrupted = False
    for _ in range(10):
        response = await api.http.delete(
            f"/api/v1/knowledge-bases/{kb_id}", params={"hard": "true"}, headers=api.auth
        )
        if response.status_code != 503:
            break
        interrupted = True
    # Gone (404) once an interrupted delete went on to finish.
    assert response.status_code in ((204, 404) if interrupted else (204,)), response.text


async def _answers(api: Api, kb_ids: list[str], phase: int) -> list[list[tuple[Any, ...]]]:
    """The hybrid answers to every query, each asked anew (`rrf_k` differs per phase, and plays
    no part in convex fusion: the answer cache cannot answer)."""
    answers = []
    for query in QUERIES:
        response = await api.http.post(
            "/api/v1/internal/knowledge/search",
            json={
                "tenant_id": "default",
                "kb_ids": kb_ids,
                "query": query,
                "top_k": 5,
                "retrieval_mode": "hybrid",
                "rrf_k": 60 + phase,
            },
            headers={"X-Internal-Secret": api.running.internal_secret},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["metrics"]["cache"]["result"] is False
        answers.append(
            [
                (hit["document_id"], hit["chunk_index"], hit["score"], hit["retrieval_rationale"])
                for hit in body["hits"]
            ]
        )
    return answers


@pytest.mark.timeout(900)
async def test_no_other_tenant_and_no_deleted_kb_moves_a_tenants_keyword_scores(
    api: Api,
) -> None:
    handbook = await api.create_kb(unique("handbook"))
    await _fill(api, handbook["id"], HANDBOOK)
    before = await _answers(api, [handbook["id"]], 0)
    # Each query finds its own passage first.
    firsts = [answer[0][0] for answer in before]
    assert len(set(firsts)) == len(QUERIES)

    # Another tenant fills a KB with documents made of the same words.
    tenant = unique("crowd")
    crowd = await _admin_elsewhere(api, tenant)
    theirs = await crowd.create_kb(unique("crowd"))
    await _fill(crowd, theirs["id"], [f"{CROWD_TEXT} {i}" for i in range(CROWD)])
    assert (await crowd.kb(theirs["id"]))["chunk_count"] >= CROWD
    assert await crowd.search([theirs["id"]], QUERIES[0], tenant_id=tenant)
    assert await _answers(api, [handbook["id"]], 1) == before

    # ... and deletes them.
    await _hard_delete(crowd, theirs["id"])
    assert await _answers(api, [handbook["id"]], 2) == before

    # A KB of the tenant's own, full of the same words: the statistics are the tenant's, so it
    # weighs on the handbook's searches too, and once deleted it weighs on nothing.
    notes = await api.create_kb(unique("notes"))
    await _fill(api, notes["id"], [f"{CROWD_TEXT} {i}" for i in range(10)])
    assert await _answers(api, [handbook["id"], notes["id"]], 3) != before
    assert await _answers(api, [handbook["id"]], 4) != before
    await _hard_delete(api, notes["id"])
    everything = await _answers(api, [handbook["id"], notes["id"]], 5)
    assert everything == before

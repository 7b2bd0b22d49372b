"""Request limits over HTTP: documents per tenant per minute, searches per second (answered
from the cache before being refused), the size of a request body, and the client library
waiting out a refusal as the API asks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from ragline_client import AsyncRagline, RateLimitError
from schemas.domain import Role
from tests.conftest import RunningPipeline, own_stack, unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack with low limits."""
    extra = {
        "RAGLINE_LIMITS__UPLOADS_PER_MINUTE": "4",
        "RAGLINE_LIMITS__SEARCHES_PER_SECOND": "2",
        "RAGLINE_API__MAX_BODY_MB": "1",
    }
    with own_stack(tmp_path_factory.mktemp("limits"), extra) as running:
        yield running


async def _text(api: Api, kb_id: str, n: int, headers: dict[str, str]) -> httpx.Response:
    return await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/documents/text",
        json={"title": f"t{n}", "content": f"Note {n} {unique('x')}"},
        headers=headers,
    )


async def _other_tenant(stack: RunningPipeline) -> dict[str, str]:
    """The auth header of an admin of a tenant of its own (made as the token CLI does)."""
    client = connect(stack.settings().mongo)
    _, token = await TokenRepository(client[stack.database], "", "default").issue(
        unique("other"), Role.ADMIN, "other admin"
    )
    await client.close()
    return {"Authorization": f"Bearer {token}"}


async def test_a_tenant_adds_documents_at_its_rate_and_others_are_not_held_back(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb()
    if time.time() % 60 > 50:  # the four must fit in one minute's window
        await asyncio.sleep(61 - time.time() % 60)
    for n in range(4):
        assert (await _text(api, kb["id"], n, api.auth)).status_code == 202
    refused = await _text(api, kb["id"], 5, api.auth)
    assert refused.status_code == 429
    assert "too many documents added" in refused.json()["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # The message names the same wait as the header.
    assert f"try again in {refused.headers['Retry-After']} s" in refused.json()["detail"]
    batch = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/batch",
        json={"records": [{"external_id": "r", "content": "over the limit"}]},
        headers=api.auth,
    )
    assert batch.status_code == 429
    # Another tenant has a rate of its own.
    other = await _other_tenant(stack)
    created = await api.http.post("/api/v1/knowledge-bases", json={"name": "o"}, headers=other)
    assert (await _text(api, created.json()["id"], 1, other)).status_code == 202


async def test_searches_over_the_rate_are_answered_from_the_cache_or_refused(
    api: Api, stack: RunningPipeline
) -> None:
    # A tenant of its own: the first test used up the default tenant's uploads.
    auth = await _other_tenant(stack)
    created = await api.http.post("/api/v1/knowledge-bases", json={"name": "s"}, headers=auth)
    kb = created.json()
    uploaded = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        files={"file": ("ferry.md", b"# Ferry\n\nThe ferry leaves at nine.")},
        headers=auth,
    )
    assert uploaded.status_code == 202, uploaded.text
    async with asyncio.timeout(60):
        while True:
            document = await api.http.get(
                f"/api/v1/knowledge-bases/{kb['id']}/documents/{uploaded.json()['id']}",
                headers=auth,
            )
            if document.json()["parse_status"] == "indexed":
                break
            await asyncio.sleep(0.2)
    bot = await api.http.post(
        "/api/v1/bots",
        json={"name": "b", "knowledge": {"enabled": True, "kb_ids": [kb["id"]]}},
        headers=auth,
    )

    async def ask(query: str) -> httpx.Response:
        return await api.http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot.json()["id"], "session_id": "s", "query": query},
            headers={"X-Internal-Secret": stack.internal_secret},
        )

    known = "When does the ferry leave?"
    assert (await ask(known)).status_code == 200  # answered, and now cached
    await asyncio.sleep(1.1)
    # Six at once, within one second's window: two allowed, the rest over the rate.
    responses = await asyncio.gather(*(ask(f"ferry question number {n}") for n in range(6)))
    answers: list[tuple[int, Any]] = [
        (r.status_code, r.headers.get("Retry-After")) for r in responses
    ]
    assert sum(status == 200 for status, _ in answers) >= 2
    assert (429, "1") in answers
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["detail"] == "too many searches; try again in 1 s"
    # Over the rate, a question answered before still gets its cached answer.
    cached = await ask(known)
    assert cached.status_code == 200
    assert cached.json()["metrics"]["cache"]["result"] is True
    await asyncio.sleep(1.1)
    assert (await ask("ferry question after the window")).status_code == 200


async def test_an_oversized_body_is_refused_before_it_is_read(api: Api) -> None:
    kb = await api.create_kb("Bodies")
    large = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/text",
        json={"title": "big", "content": "x" * (1024 * 1024 + 10)},
        headers=api.auth,
    )
    assert large.status_code == 413
    assert large.json()["detail"] == "request body larger than 1 MB"
    long_query = await api.http.post(
        "/api/v1/knowledge/search",
        json={"query": "q" * 2001},
        headers=api.auth,
    )
    assert long_query.status_code == 422
    assert "query" in long_query.json()["detail"]
    too_many = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/documents", params={"limit": 201}, headers=api.auth
    )
    assert too_many.status_code == 422


async def test_the_client_library_waits_out_the_rate_as_the_api_asks(
    stack: RunningPipeline,
) -> None:
    auth = await _other_tenant(stack)
    token = auth["Authorization"].removeprefix("Bearer ")
    async with AsyncRagline(base_url=stack.url, token=token) as admin:
        kb = await admin.create_knowledge_base(name="rates")
        ferry = await admin.add_text(kb.id, title="Ferry", content="The ferry leaves at nine.")
        assert (await admin.wait_until_final(ferry, timeout=60)).parse_status == "indexed"
    async with (
        AsyncRagline(base_url=stack.url, token=token, max_retries=0) as impatient,
        AsyncRagline(base_url=stack.url, token=token, max_retries=3) as patient,
    ):
        # Six new questions at once, at two a second: without retries some are refused with
        # the API's wait; with them, every one is answered once the rate allows.
        tried = await asyncio.gather(
            *(impatient.search(f"ferry question {n}") for n in range(6)), return_exceptions=True
        )
        refused = [outcome for outcome in tried if isinstance(outcome, RateLimitError)]
        assert refused, tried
        assert refused[0].retry_after_s == 1
        assert "too many searches" in refused[0].detail
        answered = await asyncio.gather(
            *(patient.search(f"another ferry question {n}") for n in range(6))
        )
        assert all(answer.results[0].source == ferry.id for answer in answered)

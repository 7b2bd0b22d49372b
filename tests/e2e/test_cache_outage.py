"""Redis stops in the middle: searches still answer, uncached, counted; then caching resumes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import RunningPipeline, own_stack
from tests.e2e.client import Api

# They stop and start the stand-in servers themselves.
pytestmark = [pytest.mark.e2e, pytest.mark.local_servers]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of this module's own: its Redis is stopped and started again."""
    with own_stack(tmp_path_factory.mktemp("outage")) as running:
        yield running


async def test_search_survives_redis_going_away(api: Api, stack: RunningPipeline) -> None:
    kb = await api.create_kb()
    uploaded = await api.upload(kb["id"], "faq.md", b"# FAQ\n\nThe helpdesk opens at eight.")
    document = await api.wait_final(kb["id"], uploaded["id"])
    bot_response = await api.http.post(
        "/api/v1/bots",
        json={"name": "b", "knowledge": {"enabled": True, "kb_ids": [kb["id"]]}},
        headers=api.auth,
    )
    bot = bot_response.json()["id"]

    async def ask(query: str) -> dict[str, Any]:
        response = await api.http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot, "session_id": "s", "query": query},
            headers={"X-Internal-Secret": stack.internal_secret},
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    metrics = f"{stack.url}/metrics"
    assert (await ask("When does the helpdesk open?"))["hits"]
    cached = await api.ask_bot_cached(bot, "When does the helpdesk open?")
    assert cached["hits"]
    errors_before = await api.metric(metrics, "ragline_search_cache_errors_total")

    stack.services.process("redis").stop()
    during = await ask("When does the helpdesk open?")
    assert [h["document_id"] for h in during["hits"]] == [document["id"]]
    assert during["metrics"]["cache"] == {"access": False, "embedding": False, "result": False}
    again = await ask("Is the helpdesk open at eight?")  # not cached: embedded anew
    assert again["hits"]
    assert await api.metric(metrics, "ragline_search_cache_errors_total") > errors_before

    stack.services.restart("redis")
    # The cache is skipped for a while after a failure, then used again: an answer stored once
    # it is back comes from it the next time.
    async with asyncio.timeout(30):
        while not (resumed := await ask("When does the helpdesk open?"))["metrics"]["cache"][
            "result"
        ]:
            await asyncio.sleep(0.1)
    assert [h["document_id"] for h in resumed["hits"]] == [document["id"]]

"""Two API processes answer searches they answered before from their own memory, without
asking Redis, and still refuse, with their very next search, a document deleted and a token
revoked through the other process.

Cost: a stack of its own (servers, a store process, two API processes, a worker per stage, on
the hashed embedder), two short documents and about 20 searches: about 16 s alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RunningPipeline, own_stack
from tests.e2e.client import CLIENT_LIMITS, Api

pytestmark = pytest.mark.e2e

FERRY = b"# Ferry\n\nThe ferry to the island leaves the harbour at nine every morning."
BUS = b"# Bus\n\nThe bus to the airport leaves the station at ten every evening."
QUESTION = "when does the ferry to the island leave"
MEMORY_HITS = 'ragline_search_cache_total{layer="memory",result="hit"}'


@dataclass
class Processes:
    """The stack, and a client of each of its two API processes (both as the admin)."""

    stack: RunningPipeline
    first: Api
    second: Api


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[RunningPipeline]:
    """A stack whose store is a process of its own, so a second API process can share it."""
    with own_stack(tmp_path, store_process=True) as running:
        yield running


@pytest.fixture
async def processes(stack: RunningPipeline) -> AsyncIterator[Processes]:
    """A second API process beside the stack's first."""
    second_url = await asyncio.to_thread(stack.pipeline.add_api)
    async with (
        httpx.AsyncClient(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as first,
        httpx.AsyncClient(base_url=second_url, timeout=30, limits=CLIENT_LIMITS) as second,
    ):
        yield Processes(
            stack, Api(first, stack, stack.admin_token), Api(second, stack, stack.admin_token)
        )


async def _memory_hits(api: Api) -> float:
    """Answers the process has given from its memory so far."""
    for line in (await api.http.get("/metrics")).text.splitlines():
        if line.startswith(MEMORY_HITS + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def _people_search(api: Api, token: str) -> httpx.Response:
    return await api.http.post(
        "/api/v1/knowledge/search",
        json={"query": QUESTION, "score_threshold": 0.0},
        headers={"Authorization": f"Bearer {token}"},
    )


def _documents(answer: dict[str, Any]) -> set[str]:
    return {hit["document_id"] for hit in answer["hits"]}


async def test_answers_from_memory_never_outlive_a_delete_or_a_revoked_token(
    processes: Processes,
) -> None:
    first, second = processes.first, processes.second
    kb_id = (await first.create_kb("Timetables"))["id"]
    ferry = await first.upload(kb_id, "ferry.md", FERRY)
    bus = await first.upload(kb_id, "bus.md", BUS)
    for document in (ferry, bus):
        assert (await first.wait_final(kb_id, document["id"]))["parse_status"] == "indexed"
    created = await first.http.post(
        "/api/v1/bots",
        json={"name": "desk", "knowledge": {"enabled": True, "kb_ids": [kb_id]}},
        headers=first.auth,
    )
    assert created.status_code == 201, created.text
    bot_id = created.json()["id"]

    # The second process answers the bot's question again from its memory.
    cached = await second.ask_bot_cached(bot_id, QUESTION, score_threshold=0.0)
    assert ferry["id"] in _documents(cached)
    hits = await _memory_hits(second)
    again = await second.ask_bot(bot_id, QUESTION, score_threshold=0.0)
    assert again["metrics"]["cache"]["result"]
    assert await _memory_hits(second) == hits + 1
    assert again["hits"] == cached["hits"]

    # The document deleted through the first process: the second's very next search is found
    # again, without it.
    await first.delete(kb_id, ferry["id"])
    after = await second.ask_bot(bot_id, QUESTION, score_threshold=0.0)
    assert not after["metrics"]["cache"]["result"]
    assert ferry["id"] not in _documents(after)
    assert bus["id"] in _documents(after)

    # A person's token, answered from the second process's memory, revoked through the first:
    # the second refuses the very next search asked with it.
    issued = await first.http.post(
        "/api/v1/tokens",
        json={"name": "dana's token", "role": "user", "user_id": "dana"},
        headers=first.auth,
    )
    assert issued.status_code == 201, issued.text
    token = issued.json()["token"]
    async with asyncio.timeout(10):
        while True:
            answered = await _people_search(second, token)
            assert answered.status_code == 200, answered.text
            if answered.json()["metrics"]["cache"]["result"]:
                break
    hits = await _memory_hits(second)
    assert (await _people_search(second, token)).status_code == 200
    assert await _memory_hits(second) == hits + 1
    revoked = await first.http.delete(f"/api/v1/tokens/{issued.json()['id']}", headers=first.auth)
    assert revoked.status_code == 204
    refused = await _people_search(second, token)
    assert refused.status_code == 401, refused.text

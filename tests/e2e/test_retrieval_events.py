"""Retrieval events (`rag_chunks_retrieved`) consumed from Kafka, field by field:
from the bot contract, people's search with a turn, and an MCP tool call."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from schemas.domain import chunk_id
from schemas.topics import CHUNKS_RETRIEVED
from tests.conftest import RunningPipeline, unique
from tests.e2e.client import Api
from tests.e2e.test_mcp import answer, issue, mcp_session

pytestmark = pytest.mark.e2e


async def retrieval_events(bootstrap: str, marker: str, count: int) -> list[dict[str, Any]]:
    """The events whose session, turn or query holds `marker`: waits for `count` of them,
    then takes whatever else comes within two seconds."""
    consumer = AIOKafkaConsumer(
        CHUNKS_RETRIEVED,
        bootstrap_servers=bootstrap,
        group_id=unique("events"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    found: list[dict[str, Any]] = []
    try:
        deadline = asyncio.get_running_loop().time() + 30
        quiet_until = None
        while quiet_until is None or asyncio.get_running_loop().time() < quiet_until:
            assert asyncio.get_running_loop().time() < deadline, found
            if quiet_until is None and len(found) >= count:
                quiet_until = asyncio.get_running_loop().time() + 2
            batch = await consumer.getmany(timeout_ms=500)
            if batch:
                for records in batch.values():
                    for record in records:
                        event = json.loads(record.value)
                        where = " ".join(
                            str(event.get(field)) for field in ("session_id", "turn_id", "query")
                        )
                        if marker in where:
                            found.append(event)
    finally:
        await consumer.stop()
    return found


async def test_searches_of_a_session_announce_what_they_retrieved(
    api: Api, stack: RunningPipeline
) -> None:
    run = unique("events")
    kb = await api.create_kb(f"Events {run}")
    phrase = f"The {run} ferry leaves the harbour at dawn"
    document = await api.text(kb["id"], {"title": "Ferry", "content": f"{phrase}."})
    assert (await api.wait_final(kb["id"], document["id"]))["parse_status"] == "indexed"
    bot = await api.http.post(
        "/api/v1/bots",
        json={"name": run, "knowledge": {"enabled": True, "kb_ids": [kb["id"]]}},
        headers=api.auth,
    )
    bot_id = bot.json()["id"]

    hits = await api.internal_search(
        {"bot_id": bot_id, "session_id": f"call-{run}", "turn_id": "t1", "query": phrase}
    )
    assert hits
    people = await api.http.post(
        "/api/v1/knowledge/search",
        json={"query": phrase, "kb_ids": [kb["id"]], "turn_id": f"turn-{run}"},
        headers=api.auth,
    )
    assert people.status_code == 200
    # Without a session or a turn nothing is announced.
    await api.http.post(
        "/api/v1/knowledge/search", json={"query": phrase, "kb_ids": [kb["id"]]}, headers=api.auth
    )
    bot_token = await issue(api, f"/api/v1/bots/{bot_id}/tokens", {"name": "agent"})
    async with mcp_session(api, bot_token) as session:
        answer(await session.call_tool("knowledge_search", {"query": f"{phrase} ({run})"}))

    events = await retrieval_events(stack.settings().kafka.bootstrap_servers, run, 3)
    by_channel = {event["channel"]: event for event in events}
    bot_event = by_channel["bot"]
    assert bot_event["event_type"] == "rag_chunks_retrieved"
    assert (bot_event["tenant_id"], bot_event["bot_id"], bot_event["user_id"]) == (
        "default",
        bot_id,
        None,
    )
    assert (bot_event["session_id"], bot_event["turn_id"]) == (f"call-{run}", "t1")
    assert bot_event["query"] == phrase
    assert bot_event["retrieval_mode"] == "hybrid"
    assert bot_event["chunks"][0] == {
        "chunk_id": chunk_id(document["id"], hits[0]["chunk_index"]),
        "document_id": document["id"],
        "kb_id": kb["id"],
        "score": hits[0]["score"],
    }
    assert bot_event["latency_ms"] > 0
    assert bot_event["cached"] is False
    people_event = by_channel["people"]
    assert (people_event["turn_id"], people_event["session_id"]) == (f"turn-{run}", None)
    assert [c["document_id"] for c in people_event["chunks"]] == [document["id"]]
    # The MCP call is announced under the token that made it.
    mcp_events = await retrieval_events(stack.settings().kafka.bootstrap_servers, "mcp:", 1)
    assert any(
        e["channel"] == "mcp" and e["bot_id"] == bot_id and run in e["query"] for e in mcp_events
    )

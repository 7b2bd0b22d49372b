"""Searches in two API processes at once (two systems on one MongoDB, one Redis and one store):
what one process changes, the other's very next search sees, though it answers what it answered
before from memory; an uncached search asks the store twice and Redis once before answering, an
answer cached by the other process costs one round trip to Redis, and one held in memory none.
A change waits for a process that has not applied it until that process's lease on answering
from memory runs out. (Real MongoDB and Redis servers, the real embedding model, a store in
Qdrant's API; about 12 s.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AsyncExitStack
from typing import Any

import pytest
import redis.asyncio as redis
from qdrant_client import AsyncQdrantClient
from redis.asyncio.connection import Connection

from core.errors import Unauthorized
from core.filters import SearchScope, chunks_of_document
from core.sparse import SparseEncoder, packed_terms
from devstack.launcher import LocalServices
from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.mongo.indexes import ensure_indexes
from infra.redis.search_cache import SearchCache
from infra.vectorstore.base import ChunkPoint, Rankings, RankQuery, StoredChunk
from infra.vectorstore.qdrant_server import QdrantServerStore
from ragline.system import System
from schemas.bots import BotCreate, BotUpdate, KnowledgeConfig, KnowledgePatch
from schemas.chunks import ChunkPayload
from schemas.domain import KnowledgeBase, Role, chunk_point_id
from schemas.search import BotSearchRequest, KnowledgeSearchRequest
from tests.conftest import settings_for
from tests.generations import only_generation

TEXTS = {
    "doc_refunds": "Refunds are paid back to the original card within five working days.",
    "doc_returns": "A kayak may be returned within thirty days if it is unused.",
    "doc_lunch": "Lunch is served at noon in the canteen on the second floor.",
}
QUESTION = "how long until my refund arrives on the card?"


class CountingStore(QdrantServerStore):
    """A store in Qdrant's API, counting the calls a search makes to it."""

    calls: list[str]

    async def rank(self, query: RankQuery) -> Rankings:
        self.calls.append("rank")
        return await super().rank(query)

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        self.calls.append("read")
        return await super().read(scope, point_ids, dense)


class CountingConnection(Connection):
    """A Redis connection counting what the test's own task sends (not the processes'
    background tasks: changes followed, leases renewed, answers written): one count per round
    trip (a pipeline sends all its commands at once)."""

    sent = 0
    watched: asyncio.Task[Any] | None = None

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if asyncio.current_task() is CountingConnection.watched:
            CountingConnection.sent += 1
        await super().send_packed_command(command, check_health)


@pytest.fixture
async def processes(
    local_services: LocalServices, embedder: Embedder
) -> AsyncIterator[tuple[System, System, CountingStore, KnowledgeBase]]:
    """Two systems as two API processes: one database, one Redis, one store; each listens for
    changes. A KB holds three one-chunk documents."""
    settings = settings_for(local_services)
    client = AsyncQdrantClient(location=":memory:")
    store = CountingStore(client, "chunks", embedder.dimensions)
    store.calls = []
    await store.ensure_collection()
    async with AsyncExitStack() as stack:
        first, second = System(settings, stack), System(settings, stack)
        for system in (first, second):
            # The store and the model these processes would open: shared here.
            system._store = only_generation(system.db, store, embedder.dimensions, "local")
            system.__dict__["encoders"] = Encoders(
                settings.embedding,
                settings.run_dir,
                shared={settings.embedding.identity: embedder},
            )
        for system in (first, second):
            counted = redis.Redis.from_url(
                local_services.redis_url, connection_class=CountingConnection
            )
            system.__dict__["search_cache"] = SearchCache(counted, settings.search)
            stack.push_async_callback(system.search_cache.close)
        await ensure_indexes(first.db)
        kb = await first.knowledge_base_service.create("acme", "Manuals")
        vectors = embedder.embed_documents(list(TEXTS.values()))
        sparse = SparseEncoder()
        await store.upsert(
            [
                ChunkPoint(
                    point_id=chunk_point_id(document, 0),
                    dense=vectors[n],
                    sparse=sparse.document(text),
                    payload=ChunkPayload(
                        tenant_id="acme",
                        kb_id=kb.id,
                        document_id=document,
                        chunk_index=0,
                        chunk_text=text,
                        terms=packed_terms(text),
                        active=True,
                        readers=["tenant"],
                    ),
                )
                for n, (document, text) in enumerate(TEXTS.items())
            ]
        )
        assert await first.freshness_service.start()
        assert await second.freshness_service.start()
        yield first, second, store, kb
        await first.mongo.drop_database(settings.mongo.database)


def _request(bot_id: str) -> BotSearchRequest:
    return BotSearchRequest(bot_id=bot_id, session_id="s1", query=QUESTION, score_threshold=0.0)


async def test_one_process_sees_the_others_changes_with_its_very_next_search(
    processes: tuple[System, System, CountingStore, KnowledgeBase],
) -> None:
    first, second, store, kb = processes
    CountingConnection.watched = asyncio.current_task()
    knowledge = KnowledgeConfig(enabled=True, kb_ids=[kb.id], score_threshold=0.0)
    bot = await first.bot_service.create("acme", BotCreate(name="support", knowledge=knowledge))
    search = second.search_service

    found = await search.search_bot(_request(bot.id))
    assert found.hits[0].document_id == "doc_refunds"
    sent = CountingConnection.sent
    again = await search.search_bot(_request(bot.id))
    assert again.metrics.cache.access  # the bot's access, held in memory
    assert again.metrics.cache.result  # and the answer: Redis was not asked
    assert CountingConnection.sent == sent

    # A document deleted through the first process: gone from the second's next answer,
    # which is not the one cached before.
    await store.delete(chunks_of_document("acme", "doc_refunds"))
    await first.freshness_service.kbs_changed({kb.id: kb.revision + 1})
    # The change returned once the second process had applied it.
    assert second.freshness_service._revisions[kb.id] == kb.revision + 1
    after_delete = await search.search_bot(_request(bot.id))
    assert not after_delete.metrics.cache.result
    assert "doc_refunds" not in {hit.document_id for hit in after_delete.hits}
    assert after_delete.hits

    # A KB disabled through the first process: the second searches nothing at once.
    await first.knowledge_base_service.disable("acme", kb.id)
    assert (await search.search_bot(_request(bot.id))).hits == []
    await first.knowledge_base_service.update("acme", kb.id, {"status": "active"})
    assert (await search.search_bot(_request(bot.id))).hits

    # The bot's knowledge switched off through the first process: the same.
    await first.bot_service.update(
        "acme", bot.id, BotUpdate(knowledge=KnowledgePatch(enabled=False))
    )
    assert (await search.search_bot(_request(bot.id))).hits == []

    # A token revoked through the first process: the second, which held it, refuses the very
    # next search asked with it, and the token itself.
    info, secret = await first.token_service.issue("acme", "agent", Role.USER, "u1")
    principal = await second.token_service.resolve(secret)
    assert principal is not None
    assert await second.token_service.resolve(secret) == principal  # held in memory now
    reader = await second.policy_service.reader(principal)
    people = KnowledgeSearchRequest(query=QUESTION, score_threshold=0.0)
    assert (await search.search_reader("acme", reader, people, caller=principal)).hits
    assert await first.token_service.resolve(secret) == principal  # held there too
    await first.token_service.revoke("acme", info.id)
    # The process that revoked it refuses it at once, before the change comes back from Redis.
    assert await first.token_service.resolve(secret) is None
    with pytest.raises(Unauthorized, match="revoked"):
        await search.search_reader("acme", reader, people, caller=principal)
    assert await second.token_service.resolve(secret) is None


async def test_a_search_asks_the_store_twice_and_redis_once_before_answering(
    processes: tuple[System, System, CountingStore, KnowledgeBase],
) -> None:
    first, second, store, kb = processes
    CountingConnection.watched = asyncio.current_task()
    knowledge = KnowledgeConfig(enabled=True, kb_ids=[kb.id], score_threshold=0.0, top_k=2)
    bot = await first.bot_service.create("acme", BotCreate(name="support", knowledge=knowledge))
    search = second.search_service
    for system in (first, second):  # the bot's access and the KB's revision, now held
        await system.search_service.search_bot(_request(bot.id))
        await system.search_cache.written()

    request = BotSearchRequest(bot_id=bot.id, session_id="s1", query="kayak returns")
    store.calls.clear()
    sent = CountingConnection.sent
    found = await search.search_bot(request)
    assert CountingConnection.sent - sent == 1  # limit, answer and query vector at once
    assert store.calls == ["rank", "read"]
    assert found.hits[0].document_id == "doc_returns"
    metrics = found.metrics
    steps = [metrics.access_ms, metrics.cache_ms, metrics.embedding_ms, metrics.ranking_ms]
    assert all(step > 0 for step in steps)
    assert metrics.fetch_ms > 0
    assert metrics.total_ms >= sum(steps) + metrics.fetch_ms

    # The cache writes went after the answer. The other process answers the same search from
    # Redis in one round trip, with the bytes stored, and no store call; then from its memory,
    # without one.
    await second.search_cache.written()
    store.calls.clear()
    for system, round_trips in ((first, 1), (first, 0), (second, 0)):
        sent = CountingConnection.sent
        cached = await system.search_service.search_bot(request)
        assert CountingConnection.sent - sent == round_trips
        assert store.calls == []
        assert cached.metrics.cache.result
        assert cached.body == found.body
        assert cached.hits == found.hits
        # Its retrieval event names the same chunks, read from the stored bytes.
        assert cached.retrieved() == found.retrieved()
        assert cached.retrieved()[0].document_id == "doc_returns"


async def test_a_change_waits_out_the_lease_of_a_process_that_has_not_applied_it(
    processes: tuple[System, System, CountingStore, KnowledgeBase],
) -> None:
    first, second, store, kb = processes
    knowledge = KnowledgeConfig(enabled=True, kb_ids=[kb.id], score_threshold=0.0)
    bot = await first.bot_service.create("acme", BotCreate(name="support", knowledge=knowledge))
    freshness = second.freshness_service
    await second.search_service.search_bot(_request(bot.id))
    assert (await second.search_service.search_bot(_request(bot.id))).metrics.cache.result
    lease = second.search_cache.lease_s

    # A healthy process applies a change at once: the announcement hardly waits.
    began = time.monotonic()
    await first.freshness_service.kbs_changed({kb.id: kb.revision + 1})
    assert time.monotonic() - began < lease / 2
    assert freshness._revisions[kb.id] == kb.revision + 1
    answered = await second.search_service.search_bot(_request(bot.id))
    assert not answered.metrics.cache.result  # a new revision: a new answer
    assert (await second.search_service.search_bot(_request(bot.id))).metrics.cache.result

    # A process that cannot apply changes (its listener held up): a document deleted meanwhile
    # waits until its lease runs out, and from then on it answers nothing from memory: its next
    # search, which it had answered from memory, is found again without the document.
    async with freshness._applied:
        began = time.monotonic()
        await store.delete(chunks_of_document("acme", "doc_refunds"))
        await first.freshness_service.kbs_changed({kb.id: kb.revision + 2})
        assert time.monotonic() - began >= lease * 0.9
        assert freshness._revisions[kb.id] == kb.revision + 1  # not applied
        stalled = await second.search_service.search_bot(_request(bot.id))
        assert not stalled.metrics.cache.result
        assert "doc_refunds" not in {hit.document_id for hit in stalled.hits}
    # Let go, it applies the change, takes its lease again and answers from memory what it
    # found at the new revision.
    async with asyncio.timeout(5):
        while not freshness._current(freshness.epoch):
            await asyncio.sleep(0.01)
    assert freshness._revisions[kb.id] == kb.revision + 2
    held = await second.search_service.search_bot(_request(bot.id))
    assert held.metrics.cache.result
    assert held.body == stalled.body

    # A process that closes ends its lease: the next change does not wait for it.
    await freshness.close()
    began = time.monotonic()
    await first.freshness_service.kbs_changed({kb.id: kb.revision + 3})
    assert time.monotonic() - began < lease / 2

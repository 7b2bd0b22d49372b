"""The service layer, built by the composition root, against real MongoDB and Redis: the rules
every transport (HTTP, MCP, CLI, connectors) gets from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from core.errors import Conflict, Forbidden, InvalidRequest, NotFound
from core.governance import GovernanceChange, Reader, Visibility
from devstack.launcher import LocalServices
from infra.kafka.client import build_broker, ensure_topics
from infra.mongo.indexes import ensure_indexes
from infra.settings.vectorstore import QdrantSettings
from ragline.system import System
from schemas.bots import BotCreate, BotUpdate, KnowledgeConfig, KnowledgePatch
from schemas.domain import KbStatus, Principal, Record, Role
from schemas.events import ChunksRetrieved
from schemas.topics import ALL_TOPICS
from services.freshness_service import Kind
from services.intake_service import Outcome
from services.policy_service import Submission
from tests.conftest import settings_for


@pytest.fixture
async def system(local_services: LocalServices, tmp_path: Path) -> AsyncIterator[System]:
    """A system of its own database and vector store (no Kafka: nothing is published)."""
    settings = settings_for(local_services, qdrant=QdrantSettings(path=tmp_path / "vectors"))
    async with AsyncExitStack() as stack:
        opened = System(settings, stack)
        await opened.open_vector_store()
        yield opened
        await opened.mongo.drop_database(settings.mongo.database)


@pytest.fixture
async def publishing(local_services: LocalServices, tmp_path: Path) -> AsyncIterator[System]:
    """A system of its own database and vector store that publishes to the local Kafka."""
    settings = settings_for(local_services, qdrant=QdrantSettings(path=tmp_path / "vectors"))
    await ensure_topics(settings.kafka, ALL_TOPICS)
    broker = build_broker(settings.kafka, "test-services")
    await broker.start()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(broker.stop)
        opened = System(settings, stack, broker)
        await opened.open_vector_store()
        await ensure_indexes(opened.db)
        yield opened
        await opened.mongo.drop_database(settings.mongo.database)


async def test_a_kb_being_deleted_takes_no_changes_from_any_service(system: System) -> None:
    kb = await system.knowledge_base_service.create("acme", "Manuals")
    await system.knowledge_base_repo.update("acme", kb.id, {"status": KbStatus.DELETING})
    with pytest.raises(Conflict, match="being deleted"):
        await system.knowledge_base_service.update("acme", kb.id, {"name": "Renamed"})
    with pytest.raises(Conflict, match="hard=true"):
        await system.knowledge_base_service.disable("acme", kb.id)
    with pytest.raises(Conflict, match="being deleted"):
        await system.intake_service.accept_record(
            "acme", kb.id, Record(title="t", content="words"), Submission.connector()
        )
    # Deleting again finishes the interrupted delete.
    await system.knowledge_base_service.delete("acme", kb.id)
    with pytest.raises(NotFound):
        await system.knowledge_base_service.get("acme", kb.id)


async def _applied(system: System) -> None:
    """Until this process has applied every change announced so far (it waits for them)."""
    probe = await system.search_cache.probe(None, None, "model", "q")
    await system.freshness_service.settle(probe.seq, system.freshness_service.epoch)


async def test_kb_changes_reach_the_answer_cache_and_attached_bots_access(system: System) -> None:
    assert await system.freshness_service.start()
    kb = await system.knowledge_base_service.create("acme", "Manuals")
    bot = await system.bot_service.create(
        "acme", BotCreate(name="b", knowledge=KnowledgeConfig(enabled=True, kb_ids=[kb.id]))
    )
    freshness = system.freshness_service
    await _applied(system)
    await system.access_guard.for_bot(bot.id)
    assert freshness.held(Kind.ACCESS, bot.id) is not None

    renamed = await system.knowledge_base_service.update("acme", kb.id, {"name": "Renamed"})
    await _applied(system)
    assert await freshness.revisions([kb.id], freshness.epoch) == [renamed.revision]
    # A rename does not change what a bot may search.
    assert freshness.held(Kind.ACCESS, bot.id) is not None

    disabled = await system.knowledge_base_service.disable("acme", kb.id)
    assert disabled.revision > renamed.revision
    await _applied(system)
    assert await freshness.revisions([kb.id], freshness.epoch) == [disabled.revision]
    assert freshness.held(Kind.ACCESS, bot.id) is None


async def test_bot_changes_drop_its_cached_access(system: System) -> None:
    assert await system.freshness_service.start()
    kb = await system.knowledge_base_service.create("acme", "Manuals")
    other = await system.knowledge_base_service.create("other-tenant", "Theirs")
    bot = await system.bot_service.create("acme", BotCreate(name="b"))
    with pytest.raises(InvalidRequest, match=other.id):
        await system.bot_service.update(
            "acme", bot.id, BotUpdate(knowledge=KnowledgePatch(kb_ids=[other.id]))
        )
    freshness = system.freshness_service
    await _applied(system)
    await system.access_guard.for_bot(bot.id)
    assert freshness.held(Kind.ACCESS, bot.id) is not None
    await system.bot_service.update(
        "acme", bot.id, BotUpdate(knowledge=KnowledgePatch(enabled=True, kb_ids=[kb.id]))
    )
    await _applied(system)
    assert freshness.held(Kind.ACCESS, bot.id) is None
    await system.access_guard.for_bot(bot.id)
    assert freshness.held(Kind.ACCESS, bot.id) is not None
    await system.bot_service.delete("acme", bot.id)
    await _applied(system)
    assert freshness.held(Kind.ACCESS, bot.id) is None


async def test_items_get_their_owner_and_visibility_from_who_adds_them(
    publishing: System,
) -> None:
    system = publishing
    kb = await system.knowledge_base_service.create("acme", "Policies")
    await system.people_service.register_user("acme", "uma", "Uma")
    await system.people_service.register_user("acme", "vic", "Vic")
    admin = Submission.connector()
    uma = Submission(Reader.user("uma"))

    by_admin = await system.intake_service.accept_record(
        "acme", kb.id, _record("r1", "Leave"), admin
    )
    assert by_admin.document.governance.visibility_mode is Visibility.SHARED
    assert by_admin.document.readers == ["role:admin", "tenant"]
    by_uma = await system.intake_service.accept_record("acme", kb.id, _record("r1", "Mine"), uma)
    assert by_uma.document.governance.owner_user_id == "uma"
    assert by_uma.document.governance.visibility_mode is Visibility.PRIVATE
    # Her record of the same id is a line of her own: the admin's item is not replaced.
    assert by_uma.outcome is Outcome.CREATED
    assert by_uma.document.source_key != by_admin.document.source_key

    restricted = Submission.connector(
        GovernanceChange(visibility_mode=Visibility.RESTRICTED, user_grants=["vic"])
    )
    changed = await system.intake_service.accept_record(
        "acme", kb.id, _record("r1", "Leave"), restricted, batch=True
    )
    # Same content, new permission: stored, and the pipeline runs again to show it.
    assert changed.outcome is Outcome.REINDEXED
    stored = await system.document_repo.get("acme", kb.id, by_admin.document.id)
    assert stored.readers == ["role:admin", "user:vic"]
    # A new version keeps the permission of the one it replaces.
    newer = await system.intake_service.accept_record(
        "acme", kb.id, _record("r1", "Leave v2"), admin
    )
    assert newer.outcome is Outcome.UPDATED
    assert newer.document.governance.user_grants == ["vic"]
    assert newer.document.knowledge_item_id == by_admin.document.id


async def test_governance_input_is_checked_and_changes_need_the_owner(
    publishing: System,
) -> None:
    system = publishing
    kb = await system.knowledge_base_service.create("acme", "Policies")
    await system.people_service.register_user("acme", "uma", "Uma")
    await system.people_service.register_user("acme", "vic", "Vic")
    shared = Submission.connector(GovernanceChange(visibility_mode=Visibility.SHARED))
    with pytest.raises(InvalidRequest, match="confirm_tenant_wide"):
        await system.intake_service.accept_records("acme", kb.id, [_record("r2", "x")], shared)
    ghosts = Submission.connector(GovernanceChange(audience_tags=["ghosts"]))
    with pytest.raises(InvalidRequest, match="unknown audience: ghosts"):
        await system.intake_service.accept_records("acme", kb.id, [_record("r2", "x")], ghosts)
    assert (await system.document_repo.list_page("acme", kb.id)).items == []

    grant = GovernanceChange(visibility_mode=Visibility.RESTRICTED, user_grants=["vic"])
    item = await system.intake_service.accept_record(
        "acme", kb.id, _record("r3", "Salary bands"), Submission(Reader.user("uma"), grant)
    )
    uma = Principal(tenant_id="acme", role=Role.USER, token_id="t1", user_id="uma")
    vic = uma.model_copy(update={"user_id": "vic", "token_id": "t2"})
    wes = uma.model_copy(update={"user_id": "wes", "token_id": "t3"})
    archive = GovernanceChange(archived=True)
    with pytest.raises(NotFound):  # Wes cannot read it: he does not learn it exists
        await system.governance_service.change(wes, kb.id, item.document.id, archive)
    with pytest.raises(Forbidden):  # Vic reads it but does not own it
        await system.governance_service.change(vic, kb.id, item.document.id, archive)
    done = await system.governance_service.change(uma, kb.id, item.document.id, archive)
    assert done.governance.archived_at is not None
    assert done.readers == []


def _record(external_id: str, content: str) -> Record:
    return Record(external_id=external_id, title=external_id, content=content)


async def test_a_retrieval_event_kafka_cannot_take_is_dropped_and_counted(
    local_services: LocalServices, tmp_path: Path
) -> None:
    settings = settings_for(local_services, qdrant=QdrantSettings(path=tmp_path / "vectors"))
    await ensure_topics(settings.kafka, ALL_TOPICS)
    broker = build_broker(settings.kafka, "test-events")
    async with AsyncExitStack() as stack:
        system = System(settings, stack, broker)
        event = ChunksRetrieved(
            tenant_id="acme",
            bot_id="bot_1",
            session_id="s1",
            channel="bot",
            query="q",
            retrieval_mode="hybrid",
            chunks=[],
            latency_ms=1.0,
            cached=False,
        )
        await broker.start()
        sent = _counted("sent")
        system.retrieval_events.announce(lambda: event)
        await system.retrieval_events.sent()
        assert _counted("sent") == sent + 1
        await broker.stop()  # Kafka is gone
        failed = _counted("failed")
        system.retrieval_events.announce(lambda: event)  # returns at once; nothing raised
        await system.retrieval_events.sent()
        assert _counted("failed") == failed + 1


def _counted(result: str) -> float:
    return REGISTRY.get_sample_value("ragline_retrieval_events_total", {"result": result}) or 0.0

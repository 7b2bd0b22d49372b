"""The service layer, built by the composition root, against real MongoDB and Redis: the rules
every transport (HTTP, MCP, CLI, connectors) gets from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from core.errors import Conflict, InvalidRequest, NotFound
from devstack.launcher import LocalServices
from infra.settings import QdrantSettings
from ragline.system import System
from schemas.bots import BotCreate, BotUpdate, KnowledgeConfig, KnowledgePatch
from schemas.domain import KbStatus, Record
from services.governance import Submission
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


async def test_a_kb_being_deleted_takes_no_changes_from_any_service(system: System) -> None:
    kb = await system.knowledge_bases.create("acme", "Manuals")
    await system.kbs.update("acme", kb.id, {"status": KbStatus.DELETING})
    with pytest.raises(Conflict, match="being deleted"):
        await system.knowledge_bases.update("acme", kb.id, {"name": "Renamed"})
    with pytest.raises(Conflict, match="hard=true"):
        await system.knowledge_bases.disable("acme", kb.id)
    with pytest.raises(Conflict, match="being deleted"):
        await system.intake.accept_record(
            "acme", kb.id, Record(title="t", content="words"), Submission.connector()
        )
    # Deleting again finishes the interrupted delete.
    await system.knowledge_bases.delete("acme", kb.id)
    with pytest.raises(NotFound):
        await system.knowledge_bases.get("acme", kb.id)


async def test_kb_changes_reach_the_answer_cache_and_attached_bots_access(system: System) -> None:
    kb = await system.knowledge_bases.create("acme", "Manuals")
    bot = await system.bot_admin.create(
        "acme", BotCreate(name="b", knowledge=KnowledgeConfig(enabled=True, kb_ids=[kb.id]))
    )
    await system.freshness.remember_access(bot.id, {"tenant_id": "acme"})

    renamed = await system.knowledge_bases.update("acme", kb.id, {"name": "Renamed"})
    assert await system.freshness.revisions([kb.id]) == [renamed.revision]
    # A rename does not change what a bot may search.
    assert await system.freshness.cached_access(bot.id) is not None

    disabled = await system.knowledge_bases.disable("acme", kb.id)
    assert disabled.revision > renamed.revision
    assert await system.freshness.revisions([kb.id]) == [disabled.revision]
    assert await system.freshness.cached_access(bot.id) is None


async def test_bot_changes_drop_its_cached_access(system: System) -> None:
    kb = await system.knowledge_bases.create("acme", "Manuals")
    other = await system.knowledge_bases.create("other-tenant", "Theirs")
    bot = await system.bot_admin.create("acme", BotCreate(name="b"))
    with pytest.raises(InvalidRequest, match=other.id):
        await system.bot_admin.update(
            "acme", bot.id, BotUpdate(knowledge=KnowledgePatch(kb_ids=[other.id]))
        )
    await system.freshness.remember_access(bot.id, {"tenant_id": "acme"})
    await system.bot_admin.update(
        "acme", bot.id, BotUpdate(knowledge=KnowledgePatch(enabled=True, kb_ids=[kb.id]))
    )
    assert await system.freshness.cached_access(bot.id) is None
    await system.freshness.remember_access(bot.id, {"tenant_id": "acme"})
    await system.bot_admin.delete("acme", bot.id)
    assert await system.freshness.cached_access(bot.id) is None

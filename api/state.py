"""What the HTTP layer calls: one service per area, built by the composition root
(`ragline.api`) and handed to `api.app.create_app`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from infra.audit_repository import AuditRepository
from infra.settings import Settings
from services.agent_tool_service import AgentToolService
from services.bot_service import BotService
from services.crawl_service import CrawlJobService
from services.dead_letter_service import DeadLetterService
from services.document_service import DocumentService
from services.evaluation_service import EvaluationService
from services.governance_service import GovernanceService, PolicyService
from services.intake_service import IntakeService
from services.knowledge_base_service import KnowledgeBaseService
from services.people_service import PeopleService
from services.removal_service import RemovalService
from services.search.search_service import SearchService
from services.sync_service import SyncService
from services.token_service import TokenService
from services.wiki_service import WikiService

# Each dependency's state: "ok" or what is wrong.
Readiness = Callable[[], Awaitable[dict[str, str]]]


@dataclass(frozen=True)
class ApiServices:
    """The services behind the routes, and the probe behind `/readyz`."""

    settings: Settings
    token_service: TokenService
    people_service: PeopleService
    policy_service: PolicyService
    governance_service: GovernanceService
    wiki_service: WikiService
    agent_tool_service: AgentToolService
    audit_repo: AuditRepository
    dead_letter_service: DeadLetterService
    sync_service: SyncService
    crawl_job_service: CrawlJobService
    knowledge_base_service: KnowledgeBaseService
    document_service: DocumentService
    intake_service: IntakeService
    removal_service: RemovalService
    bot_service: BotService
    search_service: SearchService
    evaluation_service: EvaluationService
    readiness: Readiness


# Opens the services for the app's lifetime (closing them with the stack).
OpenServices = Callable[[AsyncExitStack], Awaitable[ApiServices]]

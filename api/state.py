"""What the HTTP layer calls: one service per area, built by the composition root
(`ragline.api`) and handed to `api.app.create_app`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from infra.audit import AuditRepository
from infra.settings import Settings
from services.agent_tools import AgentTools
from services.bots import BotService
from services.crawl import CrawlJobs
from services.dead_letters import DeadLetters
from services.documents import DocumentQueries
from services.evaluation import Evaluations
from services.governance import ItemGovernance, ItemPolicy
from services.intake import Intake
from services.knowledge_bases import KnowledgeBaseService
from services.people import PeopleService, TokenService
from services.removal import Removal
from services.search.service import SearchService
from services.sync import SourceSync
from services.wiki import WikiService

# Each dependency's state: "ok" or what is wrong.
Readiness = Callable[[], Awaitable[dict[str, str]]]


@dataclass(frozen=True)
class ApiServices:
    """The services behind the routes, and the probe behind `/readyz`."""

    settings: Settings
    tokens: TokenService
    people: PeopleService
    policy: ItemPolicy
    governance: ItemGovernance
    wiki: WikiService
    agent_tools: AgentTools
    audit: AuditRepository
    dead_letters: DeadLetters
    sync: SourceSync
    crawl_jobs: CrawlJobs
    knowledge_bases: KnowledgeBaseService
    documents: DocumentQueries
    intake: Intake
    removal: Removal
    bots: BotService
    search: SearchService
    evaluations: Evaluations
    readiness: Readiness


# Opens the services for the app's lifetime (closing them with the stack).
OpenServices = Callable[[AsyncExitStack], Awaitable[ApiServices]]

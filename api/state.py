"""What the HTTP layer calls: the process's services, opened by the composition root
(`ragline.api`) and handed to `api.app.create_app`.

`Services` names every service a route or the MCP server calls, as a typed attribute; the
composition root's `System` is one (a name it lacks fails the type check, not a request).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Protocol

from infra.mongo.audit_repository import AuditRepository
from infra.settings import Settings
from services.agent_tool_service import AgentToolService
from services.backup_service import BackupService
from services.bot_service import BotService
from services.crawl_service import CrawlJobService
from services.dead_letter_service import DeadLetterService
from services.document_service import DocumentService
from services.evaluation_service import EvaluationService
from services.generations.generation_service import GenerationService
from services.governance_service import GovernanceService
from services.intake_service import IntakeService
from services.knowledge_base_service import KnowledgeBaseService
from services.people_service import PeopleService
from services.policy_service import PolicyService
from services.removal_service import RemovalService
from services.search.search_service import SearchService
from services.sync_service import SyncService
from services.token_service import TokenService
from services.wiki_service import WikiService

# Each dependency's state: "ok" or what is wrong.
Readiness = Callable[[], Awaitable[dict[str, str]]]


class Services(Protocol):
    """The services behind the routes and the MCP server, each built once per process."""

    @property
    def knowledge_base_service(self) -> KnowledgeBaseService: ...
    @property
    def document_service(self) -> DocumentService: ...
    @property
    def intake_service(self) -> IntakeService: ...
    @property
    def removal_service(self) -> RemovalService: ...
    @property
    def bot_service(self) -> BotService: ...
    @property
    def search_service(self) -> SearchService: ...
    @property
    def evaluation_service(self) -> EvaluationService: ...
    @property
    def token_service(self) -> TokenService: ...
    @property
    def audit_repo(self) -> AuditRepository: ...
    @property
    def dead_letter_service(self) -> DeadLetterService: ...
    @property
    def sync_service(self) -> SyncService: ...
    @property
    def crawl_job_service(self) -> CrawlJobService: ...
    @property
    def people_service(self) -> PeopleService: ...
    @property
    def policy_service(self) -> PolicyService: ...
    @property
    def governance_service(self) -> GovernanceService: ...
    @property
    def wiki_service(self) -> WikiService: ...
    @property
    def agent_tool_service(self) -> AgentToolService: ...
    @property
    def backup_service(self) -> BackupService: ...
    @property
    def generation_service(self) -> GenerationService: ...


@dataclass(frozen=True)
class ApiServices:
    """The services behind the routes, the settings, and the probe behind `/readyz`."""

    services: Services
    settings: Settings
    readiness: Readiness


# Opens the services for the app's lifetime (closing them with the stack).
OpenServices = Callable[[AsyncExitStack], Awaitable[ApiServices]]

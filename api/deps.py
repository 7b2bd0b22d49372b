"""FastAPI dependencies, as `Annotated` aliases: each route asks for the one service it calls."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api.audit_middleware import remember_principal
from api.state import ApiServices
from core.errors import Forbidden, ServiceUnavailable, Unauthorized
from core.governance import Reader
from infra.mongo.audit_repository import AuditRepository
from schemas.domain import Principal, Role
from services.agent_tool_service import Agent, AgentToolService
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


def get_services(request: Request) -> ApiServices:
    """The process's services (set by the lifespan)."""
    services: ApiServices | None = getattr(request.app.state, "services", None)
    if services is None:
        raise ServiceUnavailable("api", "still starting")
    return services


ServicesDep = Annotated[ApiServices, Depends(get_services)]


# One dependency per service a route calls, so a route receives only what it calls (async: it
# runs on the event loop, where a service is built once), and one alias for it.


async def _knowledge_base_service(opened: ServicesDep) -> KnowledgeBaseService:
    return opened.services.knowledge_base_service


KnowledgeBaseServiceDep = Annotated[KnowledgeBaseService, Depends(_knowledge_base_service)]


async def _document_service(opened: ServicesDep) -> DocumentService:
    return opened.services.document_service


DocumentServiceDep = Annotated[DocumentService, Depends(_document_service)]


async def _intake_service(opened: ServicesDep) -> IntakeService:
    return opened.services.intake_service


IntakeServiceDep = Annotated[IntakeService, Depends(_intake_service)]


async def _removal_service(opened: ServicesDep) -> RemovalService:
    return opened.services.removal_service


RemovalServiceDep = Annotated[RemovalService, Depends(_removal_service)]


async def _bot_service(opened: ServicesDep) -> BotService:
    return opened.services.bot_service


BotServiceDep = Annotated[BotService, Depends(_bot_service)]


async def _search_service(opened: ServicesDep) -> SearchService:
    return opened.services.search_service


SearchServiceDep = Annotated[SearchService, Depends(_search_service)]


async def _evaluation_service(opened: ServicesDep) -> EvaluationService:
    return opened.services.evaluation_service


EvaluationServiceDep = Annotated[EvaluationService, Depends(_evaluation_service)]


async def _token_service(opened: ServicesDep) -> TokenService:
    return opened.services.token_service


TokenServiceDep = Annotated[TokenService, Depends(_token_service)]


async def _audit_repo(opened: ServicesDep) -> AuditRepository:
    return opened.services.audit_repo


AuditRepositoryDep = Annotated[AuditRepository, Depends(_audit_repo)]


async def _dead_letter_service(opened: ServicesDep) -> DeadLetterService:
    return opened.services.dead_letter_service


DeadLetterServiceDep = Annotated[DeadLetterService, Depends(_dead_letter_service)]


async def _sync_service(opened: ServicesDep) -> SyncService:
    return opened.services.sync_service


SyncServiceDep = Annotated[SyncService, Depends(_sync_service)]


async def _crawl_job_service(opened: ServicesDep) -> CrawlJobService:
    return opened.services.crawl_job_service


CrawlJobServiceDep = Annotated[CrawlJobService, Depends(_crawl_job_service)]


async def _people_service(opened: ServicesDep) -> PeopleService:
    return opened.services.people_service


PeopleServiceDep = Annotated[PeopleService, Depends(_people_service)]


async def _policy_service(opened: ServicesDep) -> PolicyService:
    return opened.services.policy_service


PolicyServiceDep = Annotated[PolicyService, Depends(_policy_service)]


async def _governance_service(opened: ServicesDep) -> GovernanceService:
    return opened.services.governance_service


GovernanceServiceDep = Annotated[GovernanceService, Depends(_governance_service)]


async def _wiki_service(opened: ServicesDep) -> WikiService:
    return opened.services.wiki_service


WikiServiceDep = Annotated[WikiService, Depends(_wiki_service)]


async def _agent_tool_service(opened: ServicesDep) -> AgentToolService:
    return opened.services.agent_tool_service


AgentToolServiceDep = Annotated[AgentToolService, Depends(_agent_tool_service)]


async def _backup_service(opened: ServicesDep) -> BackupService:
    return opened.services.backup_service


BackupServiceDep = Annotated[BackupService, Depends(_backup_service)]


async def _generation_service(opened: ServicesDep) -> GenerationService:
    return opened.services.generation_service


GenerationServiceDep = Annotated[GenerationService, Depends(_generation_service)]


async def require_deployment_admin(
    principal: AdminPrincipal, generation_service: GenerationServiceDep
) -> Principal:
    """The caller, who must hold the deployment's admin token (what is the whole deployment's,
    as its embedding model): checked before the path is, so another tenant's admin learns
    nothing of what exists."""
    generation_service.check_admin(principal)
    return principal


DeploymentAdmin = Annotated[Principal, Depends(require_deployment_admin)]

# The schemes the OpenAPI schema declares; missing credentials are refused below, as 401s
# with a message, not by FastAPI.
BEARER = HTTPBearer(auto_error=False, description="an API token (`POST /api/v1/tokens`)")
INTERNAL_SECRET = APIKeyHeader(
    name="X-Internal-Secret", auto_error=False, description="the internal search caller's secret"
)


async def get_token_holder(
    request: Request,
    token_service: TokenServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    """Whoever holds the `Authorization: Bearer <token>`, a bot included; 401 without a valid
    token."""
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise Unauthorized("missing bearer token")
    principal = await token_service.resolve(token)
    if principal is None:
        raise Unauthorized("invalid token")
    remember_principal(request.scope, principal)
    return principal


TokenHolderDep = Annotated[Principal, Depends(get_token_holder)]


async def get_principal(holder: TokenHolderDep) -> Principal:
    """The person (or admin) behind the bearer token; a bot's token is refused (403): a bot
    searches (`POST /api/v1/knowledge/search`) and calls tools (`/mcp`), nothing else."""
    if holder.role is Role.BOT:
        raise Forbidden(
            "a bot's token is for searching (POST /api/v1/knowledge/search) and the MCP "
            "endpoint (/mcp)"
        )
    return holder


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def require_admin(principal: PrincipalDep) -> Principal:
    """The caller, who must hold the admin role."""
    if principal.role is not Role.ADMIN:
        raise Forbidden("this endpoint needs an admin token")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]


async def resolve_kb_id(
    kb_id: str, principal: PrincipalDep, knowledge_base_service: KnowledgeBaseServiceDep
) -> str:
    """The id of the KB a path names by id or by code (404 for neither in the tenant)."""
    return await knowledge_base_service.resolve(principal.tenant_id, kb_id)


# A `{kb_id}` path segment: the KB's id or its code, resolved to the id.
KbId = Annotated[str, Depends(resolve_kb_id)]


@dataclass(frozen=True)
class Caller:
    """The caller's tenant, token and what they may read."""

    principal: Principal
    reader: Reader

    @property
    def tenant_id(self) -> str:
        """The caller's tenant."""
        return self.principal.tenant_id


async def get_caller(principal: PrincipalDep, policy_service: PolicyServiceDep) -> Caller:
    """The caller with their readers (a user's audiences read now)."""
    return Caller(principal, await policy_service.reader(principal))


CallerDep = Annotated[Caller, Depends(get_caller)]


async def require_internal_caller(
    services: ServicesDep,
    x_internal_secret: Annotated[str | None, Depends(INTERNAL_SECRET)],
) -> None:
    """Admits the search caller by its shared secret: the current one or, while it is being
    rotated, the previous one (constant-time comparisons)."""
    settings = services.settings
    accepted = [settings.internal_secret, settings.internal_secret_previous]
    if not secret_matches(x_internal_secret or "", [s.get_secret_value() for s in accepted]):
        raise Unauthorized("invalid internal secret")


def secret_matches(given: str, accepted: list[str]) -> bool:
    """Whether `given` is one of the (non-empty) accepted secrets; every one is compared, in
    constant time, so the answer's timing tells nothing."""
    found = False
    for secret in accepted:
        if secret and hmac.compare_digest(given.encode(), secret.encode()):
            found = True
    return found


InternalCaller = Depends(require_internal_caller)


async def get_searcher(holder: TokenHolderDep, agent_tool_service: AgentToolServiceDep) -> Agent:
    """Who searches with the bearer token: a bot (its KBs and knowledge settings) or a person
    (what they may read)."""
    return await agent_tool_service.agent(holder)


SearcherDep = Annotated[Agent, Depends(get_searcher)]

"""FastAPI dependencies, as `Annotated` aliases: each route asks for the one service it calls."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api.audit_middleware import remember_principal
from api.state import ApiServices
from core.errors import Forbidden, ServiceUnavailable, Unauthorized
from core.governance import Reader
from infra.audit_repository import AuditRepository
from schemas.domain import Principal, Role
from services.agent_tool_service import AgentToolService
from services.backup_service import BackupService
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

T = TypeVar("T")


def get_services(request: Request) -> ApiServices:
    """The process's services (set by the lifespan)."""
    services: ApiServices | None = getattr(request.app.state, "services", None)
    if services is None:
        raise ServiceUnavailable("api", "still starting")
    return services


ServicesDep = Annotated[ApiServices, Depends(get_services)]


def provide(kind: type[T]) -> Callable[[ApiServices], Awaitable[T]]:
    """A dependency giving the process's service of class `kind`, so a route receives only
    what it calls (async: it runs on the event loop, where a service is built once)."""

    async def pick(services: ServicesDep) -> T:
        return services.get(kind)

    return pick


# One alias per service a route calls: the class is all a new one needs.
KnowledgeBaseServiceDep = Annotated[KnowledgeBaseService, Depends(provide(KnowledgeBaseService))]
DocumentServiceDep = Annotated[DocumentService, Depends(provide(DocumentService))]
IntakeServiceDep = Annotated[IntakeService, Depends(provide(IntakeService))]
RemovalServiceDep = Annotated[RemovalService, Depends(provide(RemovalService))]
BotServiceDep = Annotated[BotService, Depends(provide(BotService))]
SearchServiceDep = Annotated[SearchService, Depends(provide(SearchService))]
EvaluationServiceDep = Annotated[EvaluationService, Depends(provide(EvaluationService))]
TokenServiceDep = Annotated[TokenService, Depends(provide(TokenService))]
AuditRepositoryDep = Annotated[AuditRepository, Depends(provide(AuditRepository))]
DeadLetterServiceDep = Annotated[DeadLetterService, Depends(provide(DeadLetterService))]
SyncServiceDep = Annotated[SyncService, Depends(provide(SyncService))]
CrawlJobServiceDep = Annotated[CrawlJobService, Depends(provide(CrawlJobService))]
PeopleServiceDep = Annotated[PeopleService, Depends(provide(PeopleService))]
PolicyServiceDep = Annotated[PolicyService, Depends(provide(PolicyService))]
GovernanceServiceDep = Annotated[GovernanceService, Depends(provide(GovernanceService))]
WikiServiceDep = Annotated[WikiService, Depends(provide(WikiService))]
AgentToolServiceDep = Annotated[AgentToolService, Depends(provide(AgentToolService))]
BackupServiceDep = Annotated[BackupService, Depends(provide(BackupService))]


# The schemes the OpenAPI schema declares; missing credentials are refused below, as 401s
# with a message, not by FastAPI.
BEARER = HTTPBearer(auto_error=False, description="an API token (`POST /api/v1/tokens`)")
INTERNAL_SECRET = APIKeyHeader(
    name="X-Internal-Secret", auto_error=False, description="the internal search caller's secret"
)


async def get_principal(
    request: Request,
    token_service: TokenServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    """The caller behind `Authorization: Bearer <token>`; 401 without a valid token."""
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise Unauthorized("missing bearer token")
    principal = await token_service.resolve(token)
    if principal is None:
        raise Unauthorized("invalid token")
    remember_principal(request.scope, principal)
    if principal.role is Role.BOT:
        raise Forbidden("a bot's token is for the MCP endpoint (/mcp)")
    return principal


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

"""FastAPI dependencies, as `Annotated` aliases: each route asks for the one service it calls."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import BackgroundTasks, Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api.audit import remember_principal
from api.state import ApiServices
from core.errors import Forbidden, ServiceUnavailable, Unauthorized
from core.governance import Reader
from infra.audit import AuditRepository
from schemas.domain import Principal, Role
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
from services.search.events import Defer
from services.search.service import SearchService
from services.sync import SourceSync
from services.wiki import WikiService


def get_services(request: Request) -> ApiServices:
    """The process's services (set by the lifespan)."""
    services: ApiServices | None = getattr(request.app.state, "services", None)
    if services is None:
        raise ServiceUnavailable("api", "still starting")
    return services


ServicesDep = Annotated[ApiServices, Depends(get_services)]


def _service(name: str) -> Callable[[ApiServices], object]:
    """A dependency giving one of the services, so a route receives only what it calls."""

    def pick(services: ServicesDep) -> object:
        return getattr(services, name)

    return pick


KnowledgeBases = Annotated[KnowledgeBaseService, Depends(_service("knowledge_bases"))]
Documents = Annotated[DocumentQueries, Depends(_service("documents"))]
IntakeDep = Annotated[Intake, Depends(_service("intake"))]
RemovalDep = Annotated[Removal, Depends(_service("removal"))]
Bots = Annotated[BotService, Depends(_service("bots"))]
Search = Annotated[SearchService, Depends(_service("search"))]
EvaluationsDep = Annotated[Evaluations, Depends(_service("evaluations"))]
Tokens = Annotated[TokenService, Depends(_service("tokens"))]
Audit = Annotated[AuditRepository, Depends(_service("audit"))]
DeadLettersDep = Annotated[DeadLetters, Depends(_service("dead_letters"))]
SyncDep = Annotated[SourceSync, Depends(_service("sync"))]
CrawlJobsDep = Annotated[CrawlJobs, Depends(_service("crawl_jobs"))]
People = Annotated[PeopleService, Depends(_service("people"))]
Policy = Annotated[ItemPolicy, Depends(_service("policy"))]
GovernanceDep = Annotated[ItemGovernance, Depends(_service("governance"))]
Wiki = Annotated[WikiService, Depends(_service("wiki"))]
AgentToolsDep = Annotated[AgentTools, Depends(_service("agent_tools"))]


# The schemes the OpenAPI schema declares; missing credentials are refused below, as 401s
# with a message, not by FastAPI.
BEARER = HTTPBearer(auto_error=False, description="an API token (`POST /api/v1/tokens`)")
INTERNAL_SECRET = APIKeyHeader(
    name="X-Internal-Secret", auto_error=False, description="the internal search caller's secret"
)


async def get_principal(
    request: Request,
    tokens: Tokens,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    """The caller behind `Authorization: Bearer <token>`; 401 without a valid token."""
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise Unauthorized("missing bearer token")
    principal = await tokens.resolve(token)
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


async def resolve_kb_id(kb_id: str, principal: PrincipalDep, kbs: KnowledgeBases) -> str:
    """The id of the KB a path names by id or by code (404 for neither in the tenant)."""
    return await kbs.resolve(principal.tenant_id, kb_id)


def after_response(background: BackgroundTasks) -> Defer:
    """Runs deferred jobs once the response has been sent (FastAPI's background tasks)."""

    async def run(job: Callable[[], Awaitable[None]]) -> None:
        await job()

    return lambda job: background.add_task(run, job)


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


async def get_caller(principal: PrincipalDep, policy: Policy) -> Caller:
    """The caller with their readers (a user's audiences read now)."""
    return Caller(principal, await policy.reader(principal))


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

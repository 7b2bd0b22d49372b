"""The audit log of the caller's tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import AdminPrincipal, AuditRepositoryDep
from api.responses import AUTHENTICATED, refusals
from schemas.api import AuditPage

router = APIRouter(prefix="/api/v1/audit", tags=["audit"], responses=AUTHENTICATED)


@router.get("", responses=refusals(422))
async def audit_log(
    principal: AdminPrincipal,
    audit_repo: AuditRepositoryDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[datetime | None, Query(description="entries older than this")] = None,
) -> AuditPage:
    """Who changed what in the tenant, and how it ended, newest first."""
    return AuditPage(items=await audit_repo.page(principal.tenant_id, limit, before))

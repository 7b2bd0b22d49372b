"""The internal search endpoint the agent runtime calls."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import InternalCaller, ServicesDep
from schemas.api import SearchResponse, TenantSearchRequest

router = APIRouter(prefix="/api/v1/internal/knowledge", tags=["search"])


@router.post("/search", dependencies=[InternalCaller])
async def search(body: TenantSearchRequest, services: ServicesDep) -> SearchResponse:
    """Searches the tenant's requested, active knowledge bases."""
    return await services.search.search_tenant(body)

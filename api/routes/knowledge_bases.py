"""Admin endpoints for knowledge bases, under /api/v1/knowledge-bases."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse

from api.deps import AdminPrincipal, ServicesDep
from core.errors import Conflict
from schemas.api import (
    KnowledgeBaseCreate,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    KnowledgeBaseUpdate,
)
from schemas.domain import KbStatus

router = APIRouter(prefix="/api/v1/knowledge-bases", tags=["knowledge bases"])


@router.post("", status_code=status.HTTP_201_CREATED)
@router.post("/", status_code=status.HTTP_201_CREATED, include_in_schema=False)
async def create_knowledge_base(
    body: KnowledgeBaseCreate, principal: AdminPrincipal, services: ServicesDep
) -> KnowledgeBaseOut:
    """Creates a knowledge base in the caller's tenant."""
    kb = await services.kbs.create(
        principal.tenant_id, body.name, body.description, body.default_language
    )
    return KnowledgeBaseOut.of(kb)


@router.get("")
@router.get("/", include_in_schema=False)
async def list_knowledge_bases(
    principal: AdminPrincipal, services: ServicesDep
) -> KnowledgeBaseList:
    """The caller's tenant's knowledge bases, newest first."""
    kbs = await services.kbs.list_all(principal.tenant_id)
    return KnowledgeBaseList(items=[KnowledgeBaseOut.of(kb) for kb in kbs])


@router.get("/{kb_id}")
async def get_knowledge_base(
    kb_id: str, principal: AdminPrincipal, services: ServicesDep
) -> KnowledgeBaseOut:
    """One knowledge base."""
    return KnowledgeBaseOut.of(await services.kbs.get(principal.tenant_id, kb_id))


@router.patch("/{kb_id}")
async def update_knowledge_base(
    kb_id: str, body: KnowledgeBaseUpdate, principal: AdminPrincipal, services: ServicesDep
) -> KnowledgeBaseOut:
    """Changes name, description, language or status (only the fields given)."""
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    current = await services.kbs.get(principal.tenant_id, kb_id)
    if current.status is KbStatus.DELETING:
        raise Conflict(f"knowledge base {kb_id!r} is being deleted")
    if not changes:
        return KnowledgeBaseOut.of(await services.kbs.get(principal.tenant_id, kb_id))
    kb = await services.kbs.update(principal.tenant_id, kb_id, changes)
    if "status" in changes:
        await services.guard.forget_kb(kb_id)
    return KnowledgeBaseOut.of(kb)


@router.delete(
    "/{kb_id}",
    response_model=KnowledgeBaseOut,
    responses={204: {"description": "hard delete: the KB and everything in it are gone"}},
)
async def delete_knowledge_base(
    kb_id: str,
    principal: AdminPrincipal,
    services: ServicesDep,
    hard: Annotated[bool, Query(description="delete the KB and all it holds for good")] = False,
) -> Response:
    """Disables the knowledge base (its chunks drop out of search at once; nothing is lost),
    or with `hard=true` deletes it with its documents, files and chunks."""
    if hard:
        await services.removal.delete_kb(principal.tenant_id, kb_id)
        await services.guard.forget_kb(kb_id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    current = await services.kbs.get(principal.tenant_id, kb_id)
    if current.status is KbStatus.DELETING:
        raise Conflict(f"knowledge base {kb_id!r} is being deleted; delete it with hard=true")
    kb = await services.kbs.update(principal.tenant_id, kb_id, {"status": KbStatus.DISABLED})
    await services.guard.forget_kb(kb_id)
    return JSONResponse(KnowledgeBaseOut.of(kb).model_dump(mode="json"))

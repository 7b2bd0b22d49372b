"""Admin endpoints for knowledge bases, under /api/v1/knowledge-bases."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse

from api.deadline import bulk_operation
from api.deps import AdminPrincipal, KbId, KnowledgeBaseServiceDep, PrincipalDep
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.api import (
    KnowledgeBaseCreate,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    KnowledgeBaseUpdate,
)

router = APIRouter(
    prefix="/api/v1/knowledge-bases", tags=["knowledge bases"], responses=AUTHENTICATED
)


@router.post("", status_code=status.HTTP_201_CREATED, responses=refusals(409, *BODY))
@router.post("/", status_code=status.HTTP_201_CREATED, include_in_schema=False)
@bulk_operation
async def create_knowledge_base(
    body: KnowledgeBaseCreate,
    principal: AdminPrincipal,
    knowledge_base_service: KnowledgeBaseServiceDep,
) -> KnowledgeBaseOut:
    """Creates a knowledge base in the caller's tenant."""
    kb = await knowledge_base_service.create(
        principal.tenant_id,
        body.name,
        body.description,
        body.default_language,
        body.default_visibility,
        code=body.code,
        urls=body.urls,
        files=body.files,
    )
    return KnowledgeBaseOut.of(kb)


@router.get("")
@router.get("/", include_in_schema=False)
async def list_knowledge_bases(
    principal: PrincipalDep, knowledge_base_service: KnowledgeBaseServiceDep
) -> KnowledgeBaseList:
    """The caller's tenant's knowledge bases, newest first (users may list them too)."""
    items = await knowledge_base_service.list_all(principal.tenant_id)
    return KnowledgeBaseList(items=[KnowledgeBaseOut.of(kb) for kb in items])


@router.get("/{kb_id}", responses=refusals(404))
async def get_knowledge_base(
    kb_id: KbId, principal: PrincipalDep, knowledge_base_service: KnowledgeBaseServiceDep
) -> KnowledgeBaseOut:
    """One knowledge base."""
    return KnowledgeBaseOut.of(await knowledge_base_service.get(principal.tenant_id, kb_id))


@router.patch("/{kb_id}", responses=refusals(404, 409, *BODY))
@bulk_operation
async def update_knowledge_base(
    kb_id: KbId,
    body: KnowledgeBaseUpdate,
    principal: AdminPrincipal,
    knowledge_base_service: KnowledgeBaseServiceDep,
) -> KnowledgeBaseOut:
    """Changes name, description, language, default visibility or status (only the fields
    given)."""
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    return KnowledgeBaseOut.of(
        await knowledge_base_service.update(principal.tenant_id, kb_id, changes)
    )


@router.delete(
    "/{kb_id}",
    response_model=KnowledgeBaseOut,
    responses={
        204: {"description": "hard delete: the KB and everything in it are gone"},
        **refusals(404, 409, 422),
    },
)
@bulk_operation
async def delete_knowledge_base(
    kb_id: KbId,
    principal: AdminPrincipal,
    knowledge_base_service: KnowledgeBaseServiceDep,
    hard: Annotated[bool, Query(description="delete the KB and all it holds for good")] = False,
) -> Response:
    """Disables the knowledge base (its chunks drop out of search at once; nothing is lost),
    or with `hard=true` deletes it with its documents, files and chunks."""
    if hard:
        await knowledge_base_service.delete(principal.tenant_id, kb_id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    kb = await knowledge_base_service.disable(principal.tenant_id, kb_id)
    return JSONResponse(KnowledgeBaseOut.of(kb).model_dump(mode="json"))

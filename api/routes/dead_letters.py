"""Dead letters of the caller's tenant: what the pipeline gave up on, and re-driving it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from api.deadline import bulk_operation
from api.deps import AdminPrincipal, DeadLetterServiceDep
from api.responses import AUTHENTICATED, refusals
from schemas.api import DeadLetterPage, RedriveAllOut, RedriveOut

router = APIRouter(prefix="/api/v1/dead-letters", tags=["dead letters"], responses=AUTHENTICATED)

StageName = Literal["records", "extract", "chunk", "embed", "index"]


@router.get("", responses=refusals(422))
async def list_dead_letters(
    principal: AdminPrincipal,
    dead_letter_service: DeadLetterServiceDep,
    stage: Annotated[StageName | None, Query(description="only this stage's")] = None,
    include_redriven: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[datetime | None, Query(description="letters older than this")] = None,
) -> DeadLetterPage:
    """Messages the pipeline gave up on (with the error and the document), newest first."""
    items = await dead_letter_service.page(
        principal.tenant_id, limit, stage=stage, include_redriven=include_redriven, before=before
    )
    return DeadLetterPage(items=items)


@router.post("/redrive", status_code=status.HTTP_202_ACCEPTED, responses=refusals(422))
@bulk_operation
async def redrive_all(
    principal: AdminPrincipal,
    dead_letter_service: DeadLetterServiceDep,
    stage: Annotated[StageName | None, Query(description="only this stage's")] = None,
) -> RedriveAllOut:
    """Starts every letter not re-driven yet again (up to 500 a call)."""
    done = await dead_letter_service.redrive_all(principal.tenant_id, stage)
    return RedriveAllOut(
        items=[
            RedriveOut(id=r.letter.id, stage=r.letter.stage, document_id=r.document_id)
            for r in done
        ]
    )


@router.post(
    "/{letter_id}/redrive", status_code=status.HTTP_202_ACCEPTED, responses=refusals(404, 422)
)
async def redrive(
    letter_id: str, principal: AdminPrincipal, dead_letter_service: DeadLetterServiceDep
) -> RedriveOut:
    """Starts one letter's work again: its document is re-indexed (a connector's record is
    published again)."""
    done = await dead_letter_service.redrive(principal.tenant_id, letter_id)
    return RedriveOut(id=done.letter.id, stage=done.letter.stage, document_id=done.document_id)

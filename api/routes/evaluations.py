"""Retrieval evaluations of a knowledge base, under /api/v1/knowledge-bases/{kb_id}/evaluations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status

from api.audit_middleware import remember_details
from api.deadline import bulk_operation
from api.deps import AdminPrincipal, EvaluationServiceDep, KbId
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.evaluation import Applied, ApplyRequest, Evaluation, EvaluationRequest

router = APIRouter(
    prefix="/api/v1/knowledge-bases/{kb_id}/evaluations",
    tags=["evaluations"],
    responses={**AUTHENTICATED, **refusals(404)},
)


@router.post("", status_code=status.HTTP_201_CREATED, responses=refusals(409, 429, *BODY))
@bulk_operation
async def evaluate(
    kb_id: KbId,
    body: EvaluationRequest,
    principal: AdminPrincipal,
    evaluation_service: EvaluationServiceDep,
) -> Evaluation:
    """Runs the cases (`{query, expected: [document ids or text snippets]}`) through every
    retrieval mode; answers with recall@k, MRR and nDCG@10 per mode, the misses with what came
    back instead, the configuration a bot should use, and whether it is a significant gain
    over what the KB's searches use now (`gain`; `offered`: applying it is offered). The
    result is kept."""
    return await evaluation_service.evaluate(principal.tenant_id, kb_id, body)


@router.get("", responses=refusals(422))
async def list_evaluations(
    kb_id: KbId,
    principal: AdminPrincipal,
    evaluation_service: EvaluationServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> list[Evaluation]:
    """The knowledge base's evaluations, newest first."""
    return await evaluation_service.list_recent(principal.tenant_id, kb_id, limit)


@router.get("/{evaluation_id}")
async def get_evaluation(
    kb_id: KbId,
    evaluation_id: str,
    principal: AdminPrincipal,
    evaluation_service: EvaluationServiceDep,
) -> Evaluation:
    """One kept evaluation."""
    return await evaluation_service.get(principal.tenant_id, kb_id, evaluation_id)


@router.post("/{evaluation_id}/apply", responses=refusals(409, *BODY))
async def apply_evaluation(
    kb_id: KbId,
    evaluation_id: str,
    body: ApplyRequest,
    principal: AdminPrincipal,
    evaluation_service: EvaluationServiceDep,
    request: Request,
) -> Applied:
    """Applies a configuration the evaluation measured (`config`; left out, its best, and only
    when the best is a significant gain over the target's current configuration: 409 saying
    why not otherwise) to a bot with the KB attached (`{"target": "bot", "bot_id": …}`: its
    knowledge's retrieval_mode, fusion, dense_weight and rrf_k; not a sparse one), or as the
    KB's default retrieval (`{"target": "kb"}`: people's searches of the KB that name no
    mode). Answers with what was applied to what, and the settings before and after; the
    audit log keeps the same."""
    asked = body.model_dump(mode="json", exclude_none=True)
    remember_details(request.scope, {"evaluation_id": evaluation_id, "kb_id": kb_id, **asked})
    applied = await evaluation_service.apply(principal.tenant_id, kb_id, evaluation_id, body)
    remember_details(request.scope, applied.model_dump(mode="json"))
    return applied

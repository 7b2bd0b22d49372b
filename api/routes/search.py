"""The internal search endpoint the agent runtime calls."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response

from api.deps import InternalCaller, SearchServiceDep
from api.responses import BODY, refusals
from schemas.search import BotSearchRequest, InternalSearchRequest, SearchResponse

router = APIRouter(prefix="/api/v1/internal/knowledge", tags=["search"])


@router.post(
    "/search",
    dependencies=[InternalCaller],
    response_model=SearchResponse,
    responses=refusals(401, 404, 429, 503, *BODY),
)
async def search(
    body: Annotated[InternalSearchRequest, Body()], search_service: SearchServiceDep
) -> Response:
    """A bot's search (`bot_id`, `session_id`, `query`, optional `kb_ids`, `top_k`,
    `score_threshold`, `strict`, `max_context_tokens`, `user_id`, `turn_id`), announced on
    `knowledge.chunks-retrieved.v1` after the answer; or admin tooling's tenant search
    (`tenant_id`, `kb_ids`, `query`, `top_k`, `retrieval_mode`)."""
    if isinstance(body, BotSearchRequest):
        answer = await search_service.search_bot(body)
    else:
        answer = await search_service.search_tenant(body)
    # The answer's JSON as made once (a cached one as it was stored): not validated again.
    return Response(answer.json(), media_type="application/json")

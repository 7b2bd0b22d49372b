"""The internal search endpoint the agent runtime calls."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Body
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from api.deps import InternalCaller, Search, after_response
from schemas.search import BotSearchRequest, SearchResponse, TenantSearchRequest

router = APIRouter(prefix="/api/v1/internal/knowledge", tags=["search"])

SEARCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/BotSearchRequest"},
                        {"$ref": "#/components/schemas/TenantSearchRequest"},
                    ]
                }
            }
        },
    }
}


@router.post("/search", dependencies=[InternalCaller], openapi_extra=SEARCH_BODY)
async def search(
    search_service: Search,
    background: BackgroundTasks,
    body: dict[str, Any] = Body(...),  # noqa: B008 - FastAPI's idiom
) -> SearchResponse:
    """A bot's search (`bot_id`, `session_id`, `query`, optional `kb_ids`, `top_k`,
    `score_threshold`, `strict`, `max_context_tokens`, `user_id`, `turn_id`), announced on
    `knowledge.chunks-retrieved.v1` after the answer; or admin tooling's tenant search
    (`tenant_id`, `kb_ids`, `query`, `top_k`, `retrieval_mode`)."""
    try:
        if "bot_id" in body:
            request = BotSearchRequest.model_validate(body)
            return await search_service.search_bot(request, after_response(background))
        return await search_service.search_tenant(TenantSearchRequest.model_validate(body))
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        ) from exc

"""The search playground: an admin runs one of their bots' searches, as the agent runtime's
contract would, and sees why each passage came back. Under /api/v1/bots/{bot_id}/search."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from api.deps import AdminPrincipal, BotServiceDep, SearchServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.bots import Bot
from schemas.search import BotSearchOptions, BotSearchRequest, PlaygroundHit, SearchMetrics

router = APIRouter(prefix="/api/v1/bots", tags=["bots"], responses=AUTHENTICATED)


class PlaygroundResponse(BaseModel):
    """The bot's answer as the internal contract gives it, each hit with its citation."""

    hits: list[PlaygroundHit]
    metrics: SearchMetrics
    fallback_message: str | None = None


async def tenant_bot(bot_id: str, principal: AdminPrincipal, bot_service: BotServiceDep) -> Bot:
    """The caller's tenant's bot (404 for any other, before the body is validated)."""
    return await bot_service.get(principal.tenant_id, bot_id)


@router.post("/{bot_id}/search", responses=refusals(404, 429, *BODY))
async def playground_search(
    bot: Annotated[Bot, Depends(tenant_bot)],
    principal: AdminPrincipal,
    body: BotSearchOptions,
    search_service: SearchServiceDep,
) -> PlaygroundResponse:
    """Runs the bot's search through the same service as `POST
    /api/v1/internal/knowledge/search`: its attached, active KBs and knowledge settings,
    counted against its search rate. Hits come with citation, score and rationale, and the
    timings; the search is not announced as a conversation's retrieval."""
    request = BotSearchRequest(
        bot_id=bot.id,
        session_id=f"playground:{principal.token_id}",
        **body.model_dump(exclude_none=True),
    )
    answer = await search_service.search_bot(request, announce=False)
    return PlaygroundResponse(
        hits=[PlaygroundHit.of(hit) for hit in answer.hits],
        metrics=answer.metrics,
        fallback_message=answer.fallback_message,
    )

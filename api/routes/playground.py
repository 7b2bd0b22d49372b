"""The search playground: an admin runs one of their bots' searches, as the agent runtime's
contract would, and sees why each passage came back. Under /api/v1/bots/{bot_id}/search."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.deps import AdminPrincipal, Bots, Search
from api.responses import AUTHENTICATED, BODY, refusals
from core.governance import NAME_PATTERN
from schemas.bots import Bot
from schemas.domain import NOT_BLANK
from schemas.search import BotSearchRequest, SearchHit, SearchMetrics

router = APIRouter(prefix="/api/v1/bots", tags=["bots"], responses=AUTHENTICATED)


class PlaygroundSearch(BaseModel):
    """Body of `POST /api/v1/bots/{bot_id}/search`: the query, and the overrides the bot
    contract allows (left out: the bot's knowledge settings)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    kb_ids: list[str] | None = Field(default=None, max_length=100)
    top_k: int | None = Field(default=None, ge=1, le=10)
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    strict: bool | None = None
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)
    # Search as the bot does for this person (what they may read of its KBs).
    user_id: str | None = Field(default=None, pattern=NAME_PATTERN)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value


class PlaygroundHit(SearchHit):
    """A hit of the bot's search, with where to cite it."""

    citation: str


class PlaygroundResponse(BaseModel):
    """The bot's answer as the internal contract gives it, each hit with its citation."""

    hits: list[PlaygroundHit]
    metrics: SearchMetrics
    fallback_message: str | None = None


async def tenant_bot(bot_id: str, principal: AdminPrincipal, bots: Bots) -> Bot:
    """The caller's tenant's bot (404 for any other, before the body is validated)."""
    return await bots.get(principal.tenant_id, bot_id)


@router.post("/{bot_id}/search", responses=refusals(404, 429, *BODY))
async def playground_search(
    bot: Annotated[Bot, Depends(tenant_bot)],
    principal: AdminPrincipal,
    body: PlaygroundSearch,
    search: Search,
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
    answer = await search.search_bot(request)
    return PlaygroundResponse(
        hits=[PlaygroundHit(**hit.model_dump(), citation=hit.cited_as) for hit in answer.hits],
        metrics=answer.metrics,
        fallback_message=answer.fallback_message,
    )

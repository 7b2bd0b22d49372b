"""People's endpoints: search what they may read, and wiki pages."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from fastapi.responses import JSONResponse

from api.deadline import bulk_operation
from api.deps import AgentToolServiceDep, CallerDep, SearcherDep, WikiServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from core.errors import InvalidRequest
from schemas.api import WikiPageIn, WikiPageList, WikiPageOut
from schemas.search import KnowledgeResult, KnowledgeSearchRequest, KnowledgeSearchResponse
from services.intake_service import Outcome

router = APIRouter(prefix="/api/v1/knowledge", tags=["knowledge"], responses=AUTHENTICATED)


@router.post("/search", responses=refusals(404, 429, *BODY))
async def knowledge_search(
    body: KnowledgeSearchRequest, searcher: SearcherDep, agent_tool_service: AgentToolServiceDep
) -> KnowledgeSearchResponse:
    """Searches the caller's tenant's active KBs (those named, if any), returning only
    passages of items the caller may read; with a `session_id` or `turn_id`, announces what
    it retrieved after the answer. With a bot's token (`POST /api/v1/bots/{bot_id}/tokens`)
    it is the bot's search: its attached KBs, score threshold and strict mode, `top_k` at
    most 10, no `retrieval_mode`."""
    response = await agent_tool_service.search(searcher, body)
    return KnowledgeSearchResponse(
        results=[KnowledgeResult.of(hit) for hit in response.hits], metrics=response.metrics
    )


@router.post(
    "/wiki",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=WikiPageOut,
    responses={
        200: {"model": WikiPageOut, "description": "the page is unchanged"},
        **refusals(404, 409, *BODY),
    },
)
@bulk_operation
async def write_wiki_page(
    body: WikiPageIn, caller: CallerDep, wiki_service: WikiServiceDep
) -> JSONResponse:
    """Creates a page, or a new version of it (its owner or an admin); it is indexed like a
    document and replaces the old version once indexed."""
    if body.tenant_id not in (None, caller.tenant_id):
        raise InvalidRequest("tenant_id is not the caller's tenant")
    ingested = await wiki_service.write(
        caller.tenant_id,
        caller.reader,
        kb_id=body.kb_id,
        topic=body.topic,
        title=body.title,
        content=body.content,
        summary=body.summary,
        change=body.governance(),
    )
    page = WikiPageOut.of(ingested.document, body.content)
    code = 200 if ingested.outcome is Outcome.UNCHANGED else 202
    return JSONResponse(page.model_dump(mode="json"), status_code=code)


@router.get("/wiki")
async def list_wiki_pages(caller: CallerDep, wiki_service: WikiServiceDep) -> WikiPageList:
    """The wiki pages the caller may read (newest versions, without their text)."""
    pages = await wiki_service.list_pages(caller.tenant_id, caller.reader)
    return WikiPageList(items=[WikiPageOut.of(page) for page in pages])


@router.get("/wiki/{topic}", responses=refusals(404))
async def read_wiki_page(
    topic: str, caller: CallerDep, wiki_service: WikiServiceDep
) -> WikiPageOut:
    """A page with its Markdown (404 if the caller may not read it)."""
    page, content = await wiki_service.read(caller.tenant_id, caller.reader, topic)
    return WikiPageOut.of(page, content)


@router.delete("/wiki/{topic}", status_code=status.HTTP_204_NO_CONTENT, responses=refusals(404))
async def delete_wiki_page(topic: str, caller: CallerDep, wiki_service: WikiServiceDep) -> Response:
    """Deletes every version of the page (its owner or an admin)."""
    await wiki_service.delete(caller.tenant_id, caller.reader, topic)
    return Response(status_code=status.HTTP_204_NO_CONTENT)

"""Admin endpoints for bots and their knowledge attachment, under /api/v1/bots."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import AdminPrincipal, AgentToolServiceDep, BotServiceDep, TokenServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.api import BotTokenCreate, TokenList, TokenOut
from schemas.bots import Bot, BotCreate, BotList, BotUpdate
from services.agent_tool_service import FunctionTools, function_tools

router = APIRouter(prefix="/api/v1/bots", tags=["bots"], responses=AUTHENTICATED)


@router.post("", status_code=status.HTTP_201_CREATED, responses=refusals(*BODY))
async def create_bot(body: BotCreate, principal: AdminPrincipal, bot_service: BotServiceDep) -> Bot:
    """Creates a bot in the caller's tenant."""
    return await bot_service.create(principal.tenant_id, body)


@router.get("")
async def list_bots(principal: AdminPrincipal, bot_service: BotServiceDep) -> BotList:
    """The tenant's bots, newest first."""
    return BotList(items=await bot_service.list_all(principal.tenant_id))


@router.get("/{bot_id}", responses=refusals(404))
async def get_bot(bot_id: str, principal: AdminPrincipal, bot_service: BotServiceDep) -> Bot:
    """One bot."""
    return await bot_service.get(principal.tenant_id, bot_id)


@router.patch("/{bot_id}", responses=refusals(404, *BODY))
async def update_bot(
    bot_id: str, body: BotUpdate, principal: AdminPrincipal, bot_service: BotServiceDep
) -> Bot:
    """Changes the name or the knowledge attachment (only the fields given)."""
    return await bot_service.update(principal.tenant_id, bot_id, body)


@router.delete("/{bot_id}", status_code=status.HTTP_204_NO_CONTENT, responses=refusals(404))
async def delete_bot(
    bot_id: str, principal: AdminPrincipal, bot_service: BotServiceDep
) -> Response:
    """Deletes a bot; its searches are refused from now on."""
    await bot_service.delete(principal.tenant_id, bot_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{bot_id}/tokens", status_code=status.HTTP_201_CREATED, responses=refusals(404, *BODY)
)
async def create_bot_token(
    bot_id: str, body: BotTokenCreate, principal: AdminPrincipal, token_service: TokenServiceDep
) -> TokenOut:
    """Issues a token an agent uses as this bot on the MCP endpoint: the bot's attached,
    active KBs and its knowledge settings, nothing else. The secret is shown only here."""
    info, token = await token_service.issue_for_bot(
        principal.tenant_id, bot_id, body.name, body.expires_in_s
    )
    return TokenOut(
        id=info.id,
        name=info.name,
        tenant_id=info.tenant_id,
        role=info.role,
        bot_id=info.bot_id,
        expires_at=info.expires_at,
        token=token,
    )


@router.get("/{bot_id}/tokens", responses=refusals(404))
async def list_bot_tokens(
    bot_id: str, principal: AdminPrincipal, token_service: TokenServiceDep
) -> TokenList:
    """The bot's tokens, without their secrets."""
    return TokenList(items=await token_service.list_all(principal.tenant_id, bot_id))


@router.delete(
    "/{bot_id}/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses=refusals(404)
)
async def revoke_bot_token(
    bot_id: str, token_id: str, principal: AdminPrincipal, token_service: TokenServiceDep
) -> Response:
    """Revokes one of the bot's tokens: its next request is refused (401)."""
    await token_service.revoke(principal.tenant_id, token_id, bot_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{bot_id}/tools", responses=refusals(404))
async def bot_tools(
    bot_id: str, principal: AdminPrincipal, agent_tool_service: AgentToolServiceDep
) -> FunctionTools:
    """The bot's tools as JSON Schema function definitions, OpenAI-style and Gemini's
    `functionDeclarations`, with its trigger instructions and KBs in the descriptions, and
    the instructions to inject into the assistant's system prompt."""
    return await function_tools(
        agent_tool_service, await agent_tool_service.bot_agent(principal.tenant_id, bot_id)
    )

"""Admin endpoints for bots and their knowledge attachment, under /api/v1/bots."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import AdminPrincipal, ServicesDep
from api.state import Services
from core.errors import InvalidRequest
from schemas.bots import Bot, BotCreate, BotList, BotUpdate

router = APIRouter(prefix="/api/v1/bots", tags=["bots"])


async def _check_kbs(services: Services, tenant_id: str, kb_ids: list[str]) -> None:
    """Attached KBs must be the tenant's own (disabled ones may be attached)."""
    known = {kb.id for kb in await services.kbs.list_all(tenant_id)}
    unknown = [kb_id for kb_id in kb_ids if kb_id not in known]
    if unknown:
        raise InvalidRequest(f"knowledge.kb_ids: unknown knowledge base(s): {', '.join(unknown)}")


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_bot(body: BotCreate, principal: AdminPrincipal, services: ServicesDep) -> Bot:
    """Creates a bot in the caller's tenant."""
    await _check_kbs(services, principal.tenant_id, body.knowledge.kb_ids)
    return await services.bots.create(principal.tenant_id, body)


@router.get("")
async def list_bots(principal: AdminPrincipal, services: ServicesDep) -> BotList:
    """The tenant's bots, newest first."""
    return BotList(items=await services.bots.list_all(principal.tenant_id))


@router.get("/{bot_id}")
async def get_bot(bot_id: str, principal: AdminPrincipal, services: ServicesDep) -> Bot:
    """One bot."""
    return await services.bots.get(principal.tenant_id, bot_id)


@router.patch("/{bot_id}")
async def update_bot(
    bot_id: str, body: BotUpdate, principal: AdminPrincipal, services: ServicesDep
) -> Bot:
    """Changes the name or the knowledge attachment (only the fields given)."""
    if body.knowledge is not None and body.knowledge.kb_ids is not None:
        await _check_kbs(services, principal.tenant_id, body.knowledge.kb_ids)
    bot = await services.bots.update(principal.tenant_id, bot_id, body)
    await services.guard.forget_bot(bot_id)
    return bot


@router.delete("/{bot_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_bot(bot_id: str, principal: AdminPrincipal, services: ServicesDep) -> Response:
    """Deletes a bot; its searches are refused from now on."""
    await services.bots.delete(principal.tenant_id, bot_id)
    await services.guard.forget_bot(bot_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)

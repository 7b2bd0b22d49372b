"""Admin endpoints for API tokens within the caller's tenant: issue, list, revoke."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import AdminPrincipal, TokenServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.api import TokenCreate, TokenList, TokenOut

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], responses=AUTHENTICATED)


@router.post("", status_code=status.HTTP_201_CREATED, responses=refusals(*BODY))
async def create_token(
    body: TokenCreate, principal: AdminPrincipal, token_service: TokenServiceDep
) -> TokenOut:
    """Issues a token for the caller's tenant (a `user` token names its `user_id`); the secret
    is shown only in this answer."""
    info, token = await token_service.issue(
        principal.tenant_id, body.name, body.role, body.user_id, body.expires_in_s
    )
    return TokenOut(
        id=info.id,
        name=info.name,
        tenant_id=info.tenant_id,
        role=info.role,
        user_id=info.user_id,
        expires_at=info.expires_at,
        token=token,
    )


@router.get("")
async def list_tokens(principal: AdminPrincipal, token_service: TokenServiceDep) -> TokenList:
    """The tenant's tokens, without their secrets."""
    return TokenList(items=await token_service.list_all(principal.tenant_id))


@router.delete("/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses=refusals(404))
async def revoke_token(
    token_id: str, principal: AdminPrincipal, token_service: TokenServiceDep
) -> Response:
    """Revokes a token: the next request with it is refused (401)."""
    await token_service.revoke(principal.tenant_id, token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)

"""Admin endpoint issuing API tokens within the caller's tenant."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import AdminPrincipal, Tokens
from schemas.api import TokenCreate, TokenOut

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_token(body: TokenCreate, principal: AdminPrincipal, tokens: Tokens) -> TokenOut:
    """Issues a token for the caller's tenant; the secret is shown only in this answer."""
    token_id, token = await tokens.issue(principal.tenant_id, body.role, body.name)
    return TokenOut(
        id=token_id, name=body.name, tenant_id=principal.tenant_id, role=body.role, token=token
    )

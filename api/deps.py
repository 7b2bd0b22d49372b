"""FastAPI dependencies, as `Annotated` aliases."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Request

from api.state import Services
from core.errors import Forbidden, ServiceUnavailable, Unauthorized
from schemas.domain import Principal, Role


def get_services(request: Request) -> Services:
    """The process's services (set by the lifespan)."""
    services: Services | None = getattr(request.app.state, "services", None)
    if services is None:
        raise ServiceUnavailable("api", "still starting")
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_principal(
    services: ServicesDep,
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    """The caller behind `Authorization: Bearer <token>`; 401 without a valid token."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token")
    principal = await services.tokens.resolve(token.strip())
    if principal is None:
        raise Unauthorized("invalid token")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def require_admin(principal: PrincipalDep) -> Principal:
    """The caller, who must hold the admin role."""
    if principal.role is not Role.ADMIN:
        raise Forbidden("this endpoint needs an admin token")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]


async def require_internal_caller(
    services: ServicesDep,
    x_internal_secret: Annotated[str | None, Header()] = None,
) -> None:
    """Admits the search caller by its shared secret (constant-time comparison)."""
    expected = services.settings.internal_secret.get_secret_value().encode()
    given = (x_internal_secret or "").encode()
    if not expected or not hmac.compare_digest(given, expected):
        raise Unauthorized("invalid internal secret")


InternalCaller = Depends(require_internal_caller)

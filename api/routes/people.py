"""Admin endpoints for the tenant's users and audiences, and each audience's members."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import AdminPrincipal, PeopleServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from core.errors import InvalidRequest
from schemas.api import AudienceIn, AudienceList, AudienceMembersIn, UserIn, UserList
from schemas.domain import Audience, User

router = APIRouter(prefix="/api/v1", tags=["people"], responses=AUTHENTICATED)


@router.get("/users")
async def list_users(principal: AdminPrincipal, people_service: PeopleServiceDep) -> UserList:
    """The tenant's users (registered by a token naming them, or here)."""
    return UserList(items=await people_service.users(principal.tenant_id))


@router.put("/users/{user_id}", responses=refusals(404, *BODY))
async def put_user(
    user_id: str, body: UserIn, principal: AdminPrincipal, people_service: PeopleServiceDep
) -> User:
    """Registers a user (or renames one), so grants and audiences may name them."""
    return await people_service.register_user(principal.tenant_id, user_id, body.display_name)


@router.get("/audiences")
async def list_audiences(
    principal: AdminPrincipal, people_service: PeopleServiceDep
) -> AudienceList:
    """The tenant's audiences with their members."""
    return AudienceList(items=await people_service.audiences(principal.tenant_id))


@router.put("/audiences/{tag}", responses=refusals(404, *BODY))
async def put_audience(
    tag: str, body: AudienceIn, principal: AdminPrincipal, people_service: PeopleServiceDep
) -> Audience:
    """Creates an audience or changes its description (its members stay)."""
    return await people_service.put_audience(principal.tenant_id, tag, body.description)


@router.put("/audiences/{tag}/members", responses=refusals(404, *BODY))
async def put_audience_members(
    tag: str, body: AudienceMembersIn, principal: AdminPrincipal, people_service: PeopleServiceDep
) -> Audience:
    """Replaces the audience's members; it counts at their next search."""
    if body.audience_tag not in (None, tag):
        raise InvalidRequest(f"audience_tag {body.audience_tag!r} does not match the path")
    if body.tenant_id not in (None, principal.tenant_id):
        raise InvalidRequest("tenant_id is not the caller's tenant")
    return await people_service.set_members(principal.tenant_id, tag, body.user_ids)


@router.delete("/audiences/{tag}", status_code=status.HTTP_204_NO_CONTENT, responses=refusals(404))
async def delete_audience(
    tag: str, principal: AdminPrincipal, people_service: PeopleServiceDep
) -> Response:
    """Deletes an audience: its members stop reading through it at once."""
    await people_service.delete_audience(principal.tenant_id, tag)
    return Response(status_code=status.HTTP_204_NO_CONTENT)

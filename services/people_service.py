"""The people of a tenant: users and audiences (their tokens are `services.token_service`).
An admin administers them; membership counts at the next search (a change of an audience
retires the readers every process holds, and the answer cache is keyed by them)."""

from __future__ import annotations

from core.errors import InvalidRequest, NotFound
from core.governance import valid_name
from infra.mongo.audience_repository import AudienceRepository
from infra.mongo.user_repository import UserRepository
from schemas.domain import Audience, User
from services.freshness_service import FreshnessService


class PeopleService:
    """The tenant's users and audiences."""

    def __init__(
        self, users: UserRepository, audiences: AudienceRepository, freshness: FreshnessService
    ) -> None:
        self._users = users
        self._audiences = audiences
        self._freshness = freshness

    async def register_user(self, tenant_id: str, user_id: str, display_name: str) -> User:
        """Adds (or renames) a user, so grants and audiences may name them."""
        _check_name("user id", user_id)
        return await self._users.register(tenant_id, user_id, display_name)

    async def users(self, tenant_id: str) -> list[User]:
        """The tenant's users."""
        return await self._users.list_all(tenant_id)

    async def audiences(self, tenant_id: str) -> list[Audience]:
        """The tenant's audiences with their members."""
        return await self._audiences.list_all(tenant_id)

    async def put_audience(self, tenant_id: str, tag: str, description: str) -> Audience:
        """Creates an audience or changes its description."""
        _check_name("audience tag", tag)
        audience = await self._audiences.put(tenant_id, tag, description)
        await self._freshness.people_changed(tenant_id)
        return audience

    async def set_members(self, tenant_id: str, tag: str, user_ids: list[str]) -> Audience:
        """Replaces an audience's members (422 naming any unknown user)."""
        await self._audiences.get(tenant_id, tag)
        unknown = await self._users.unknown(tenant_id, user_ids)
        if unknown:
            raise InvalidRequest(f"unknown user: {', '.join(unknown)}")
        audience = await self._audiences.set_members(tenant_id, tag, user_ids)
        await self._freshness.people_changed(tenant_id)
        return audience

    async def delete_audience(self, tenant_id: str, tag: str) -> None:
        """Deletes an audience: its members stop reading through it at once."""
        if not await self._audiences.delete(tenant_id, tag):
            raise NotFound("audience", tag)
        await self._freshness.people_changed(tenant_id)


def _check_name(kind: str, name: str) -> None:
    if not valid_name(name):
        raise InvalidRequest(
            f"invalid {kind} {name!r}: letters, digits, '.', '_', '@' or '-', at most 128"
        )

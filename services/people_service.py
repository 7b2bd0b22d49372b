"""The people of a tenant and what they hold: tokens (with a role and maybe a user), users,
and audiences. An admin administers them; membership counts at the next search (a search
reads the caller's audiences afresh, and the answer cache is keyed by them)."""

from __future__ import annotations

from datetime import timedelta

from core.errors import InvalidRequest, NotFound
from core.governance import valid_name
from infra.audience_repository import AudienceRepository
from infra.bot_repository import BotRepository
from infra.token_repository import TokenRepository
from infra.user_repository import UserRepository
from schemas.domain import Audience, Principal, Role, TokenInfo, User, utcnow


class TokenService:
    """Issues, lists and revokes the tenant's API tokens."""

    def __init__(self, tokens: TokenRepository, users: UserRepository, bots: BotRepository) -> None:
        self._tokens = tokens
        self._users = users
        self._bots = bots

    async def issue(
        self,
        tenant_id: str,
        name: str,
        role: Role,
        user_id: str | None = None,
        expires_in_s: int | None = None,
    ) -> tuple[TokenInfo, str]:
        """A new token and its secret (shown once); a token naming a user registers them;
        with `expires_in_s` it is refused after that long."""
        if role is Role.BOT:
            raise InvalidRequest("a bot's tokens are issued at /api/v1/bots/{bot_id}/tokens")
        if role is Role.USER and user_id is None:
            raise InvalidRequest("a user token needs a user_id")
        if user_id is not None:
            await self._users.register(tenant_id, user_id)
        expires_at = None if expires_in_s is None else utcnow() + timedelta(seconds=expires_in_s)
        return await self._tokens.issue(tenant_id, role, name, user_id, expires_at=expires_at)

    async def issue_for_bot(
        self, tenant_id: str, bot_id: str, name: str, expires_in_s: int | None = None
    ) -> tuple[TokenInfo, str]:
        """A token an agent uses as the bot (MCP): the bot's KBs and settings, nothing else."""
        await self._tenant_bot(tenant_id, bot_id)
        expires_at = None if expires_in_s is None else utcnow() + timedelta(seconds=expires_in_s)
        return await self._tokens.issue(
            tenant_id, Role.BOT, name, bot_id=bot_id, expires_at=expires_at
        )

    async def list_all(self, tenant_id: str, bot_id: str | None = None) -> list[TokenInfo]:
        """The tenant's tokens (a bot's, if given: `NotFound` for none of the tenant's), without
        secrets."""
        if bot_id is not None:
            await self._tenant_bot(tenant_id, bot_id)
        return await self._tokens.list_all(tenant_id, bot_id)

    async def _tenant_bot(self, tenant_id: str, bot_id: str) -> None:
        bot = await self._bots.find(bot_id)
        if bot is None or bot.tenant_id != tenant_id:
            raise NotFound("bot", bot_id)

    async def revoke(self, tenant_id: str, token_id: str, bot_id: str | None = None) -> None:
        """Revokes a token at once; `NotFound` for none of the tenant's (or the bot's)."""
        if not await self._tokens.revoke(tenant_id, token_id, bot_id):
            raise NotFound("token", token_id)

    async def resolve(self, token: str) -> Principal | None:
        """Who a bearer token stands for, or None."""
        return await self._tokens.resolve(token)


class PeopleService:
    """The tenant's users and audiences."""

    def __init__(self, users: UserRepository, audiences: AudienceRepository) -> None:
        self._users = users
        self._audiences = audiences

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
        return await self._audiences.put(tenant_id, tag, description)

    async def set_members(self, tenant_id: str, tag: str, user_ids: list[str]) -> Audience:
        """Replaces an audience's members (422 naming any unknown user)."""
        await self._audiences.get(tenant_id, tag)
        unknown = await self._users.unknown(tenant_id, user_ids)
        if unknown:
            raise InvalidRequest(f"unknown user: {', '.join(unknown)}")
        return await self._audiences.set_members(tenant_id, tag, user_ids)

    async def delete_audience(self, tenant_id: str, tag: str) -> None:
        """Deletes an audience: its members stop reading through it at once."""
        if not await self._audiences.delete(tenant_id, tag):
            raise NotFound("audience", tag)


def _check_name(kind: str, name: str) -> None:
    if not valid_name(name):
        raise InvalidRequest(
            f"invalid {kind} {name!r}: letters, digits, '.', '_', '@' or '-', at most 128"
        )

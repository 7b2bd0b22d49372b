"""The tenant's API tokens (with a role and maybe a user, or a bot's): issued, listed and
revoked by an admin, resolved for every request (from the process's memory once resolved: a
revocation retires it in every process, `services.freshness_service`)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from core.errors import InvalidRequest, NotFound
from infra.mongo.bot_repository import BotRepository
from infra.mongo.token_repository import TokenRepository, hash_token
from infra.mongo.user_repository import UserRepository
from schemas.domain import Principal, Role, TokenInfo, utcnow
from services.freshness_service import FreshnessService, Kind


class TokenService:
    """Issues, lists and revokes the tenant's API tokens."""

    def __init__(
        self,
        tokens: TokenRepository,
        users: UserRepository,
        bots: BotRepository,
        freshness: FreshnessService,
    ) -> None:
        self._tokens = tokens
        self._users = users
        self._bots = bots
        self._freshness = freshness

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
        await self._freshness.token_revoked(token_id)

    async def resolve(self, token: str) -> Principal | None:
        """Who a bearer token stands for, or None."""
        digest = hash_token(token)
        held = self._freshness.held(Kind.PRINCIPAL, digest)
        if isinstance(held, Principal):
            return held
        since = self._freshness.epoch
        found = await self._tokens.lookup(digest)
        if found is None:
            return None
        principal, expires_at = found
        self._hold(digest, principal, expires_at, since)
        return principal

    async def learn(self, limit: int) -> list[Principal]:
        """Holds in memory whom the `limit` most recently issued tokens stand for, before
        their first request; returns them."""
        since = self._freshness.epoch
        newest = await self._tokens.newest(limit)
        for digest, principal, expires_at in newest:
            self._hold(digest, principal, expires_at, since)
        return [principal for _, principal, _ in newest]

    def _hold(
        self, digest: str, principal: Principal, expires_at: datetime | None, since: int
    ) -> None:
        until = None
        if expires_at is not None:
            until = time.monotonic() + (expires_at - utcnow()).total_seconds()
        self._freshness.hold(Kind.PRINCIPAL, digest, principal, since, until=until)

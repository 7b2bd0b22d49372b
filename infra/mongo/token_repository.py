"""API tokens: each belongs to one tenant, carries a role and maybe a user. Only a hash is
stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime
from typing import Any

from infra.mongo.client import TOKENS, Database, from_mongo, mongo_errors
from schemas.domain import Principal, Role, TokenInfo, utcnow

BOOTSTRAP_TOKEN_ID = "bootstrap"  # noqa: S105 - an id, not a secret


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random bearer token."""
    return f"rl_{secrets.token_urlsafe(32)}"


class TokenRepository:
    """Issues, lists, revokes and resolves bearer tokens."""

    def __init__(self, db: Database, bootstrap_token: str, bootstrap_tenant: str) -> None:
        self._tokens = db[TOKENS]
        self._bootstrap_hash = hash_token(bootstrap_token) if bootstrap_token else ""
        self._bootstrap_tenant = bootstrap_tenant

    async def issue(
        self,
        tenant_id: str,
        role: Role,
        name: str,
        user_id: str | None = None,
        bot_id: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[TokenInfo, str]:
        """Creates a token; returns it and its secret. The secret is not stored."""
        token = new_token()
        info = TokenInfo(
            id=f"tok_{secrets.token_hex(6)}",
            tenant_id=tenant_id,
            role=role,
            name=name,
            user_id=user_id,
            bot_id=bot_id,
            created_at=utcnow(),
            expires_at=expires_at,
        )
        async with mongo_errors():
            await self._tokens.insert_one(
                {"_id": hash_token(token), "token_id": info.id, **info.model_dump(exclude={"id"})}
            )
        return info, token

    async def list_all(self, tenant_id: str, bot_id: str | None = None) -> list[TokenInfo]:
        """The tenant's tokens (a bot's, if given), never their secrets, oldest first."""
        query: dict[str, object] = {"tenant_id": tenant_id}
        if bot_id is not None:
            query["bot_id"] = bot_id
        async with mongo_errors():
            cursor = self._tokens.find(query).sort("created_at", 1)
            return [_info(doc) async for doc in cursor]

    async def revoke(self, tenant_id: str, token_id: str, bot_id: str | None = None) -> bool:
        """Deletes one of the tenant's tokens (of this bot, if given): the next request with
        it is refused."""
        query: dict[str, object] = {"tenant_id": tenant_id, "token_id": token_id}
        if bot_id is not None:
            query["bot_id"] = bot_id
        async with mongo_errors():
            result = await self._tokens.delete_one(query)
        return result.deleted_count == 1

    async def resolve(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None."""
        found = await self.lookup(hash_token(token))
        return None if found is None else found[0]

    async def lookup(self, digest: str) -> tuple[Principal, datetime | None] | None:
        """The principal a token's hash stands for and when the token expires (None: never),
        or None for no such token or an expired one."""
        if self._bootstrap_hash and hmac.compare_digest(digest, self._bootstrap_hash):
            principal = Principal(
                tenant_id=self._bootstrap_tenant, role=Role.ADMIN, token_id=BOOTSTRAP_TOKEN_ID
            )
            return principal, None
        async with mongo_errors():
            doc = await self._tokens.find_one({"_id": digest})
        if doc is None:
            return None
        expires_at = _expiry(doc)
        if expires_at is not None and expires_at <= utcnow():
            return None
        return _principal(doc), expires_at

    async def newest(self, limit: int) -> list[tuple[str, Principal, datetime | None]]:
        """Up to `limit` unexpired tokens, the most recently issued first: each one's hash,
        whom it stands for and when it expires (None: never)."""
        unexpired = {"$or": [{"expires_at": None}, {"expires_at": {"$gt": utcnow()}}]}
        async with mongo_errors():
            cursor = self._tokens.find(unexpired).sort("created_at", -1).limit(limit)
            return [(str(doc["_id"]), _principal(doc), _expiry(doc)) async for doc in cursor]


def _principal(doc: dict[str, Any]) -> Principal:
    """Whom a stored token stands for."""
    return Principal(
        tenant_id=doc["tenant_id"],
        role=Role(doc["role"]),
        token_id=doc["token_id"],
        user_id=doc.get("user_id"),
        bot_id=doc.get("bot_id"),
    )


def _expiry(doc: dict[str, Any]) -> datetime | None:
    """When a stored token expires (None: never)."""
    expires_at = doc.get("expires_at")
    return None if expires_at is None else _aware(expires_at)


def _aware(moment: datetime) -> datetime:
    """MongoDB gives datetimes back without a zone; they are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _info(doc: dict[str, object]) -> TokenInfo:
    record = from_mongo(doc)
    record["id"] = record.pop("token_id")
    return TokenInfo.model_validate(record)

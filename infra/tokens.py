"""API tokens: each belongs to one tenant and carries a role. Only a hash is stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from infra.mongo import TOKENS, Database, mongo_errors
from schemas.domain import Principal, Role, utcnow

BOOTSTRAP_TOKEN_ID = "bootstrap"  # noqa: S105 - an id, not a secret


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random bearer token."""
    return f"rl_{secrets.token_urlsafe(32)}"


class TokenRepository:
    """Issues and resolves bearer tokens."""

    def __init__(self, db: Database, bootstrap_token: str, bootstrap_tenant: str) -> None:
        self._tokens = db[TOKENS]
        self._bootstrap_hash = hash_token(bootstrap_token) if bootstrap_token else ""
        self._bootstrap_tenant = bootstrap_tenant

    async def issue(self, tenant_id: str, role: Role, name: str) -> tuple[str, str]:
        """Creates a token; returns (token id, secret token). The secret is not stored."""
        token = new_token()
        token_id = f"tok_{secrets.token_hex(6)}"
        async with mongo_errors():
            await self._tokens.insert_one(
                {
                    "_id": hash_token(token),
                    "token_id": token_id,
                    "tenant_id": tenant_id,
                    "role": role.value,
                    "name": name,
                    "created_at": utcnow(),
                }
            )
        return token_id, token

    async def resolve(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None."""
        digest = hash_token(token)
        if self._bootstrap_hash and hmac.compare_digest(digest, self._bootstrap_hash):
            return Principal(
                tenant_id=self._bootstrap_tenant, role=Role.ADMIN, token_id=BOOTSTRAP_TOKEN_ID
            )
        async with mongo_errors():
            doc = await self._tokens.find_one({"_id": digest})
        if doc is None:
            return None
        return Principal(
            tenant_id=doc["tenant_id"], role=Role(doc["role"]), token_id=doc["token_id"]
        )

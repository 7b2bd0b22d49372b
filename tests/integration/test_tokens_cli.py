"""The operator's token command, through the composition root, against real MongoDB."""

from __future__ import annotations

from devstack.launcher import LocalServices
from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from ragline.tokens_cli import issue
from schemas.domain import Role
from tests.conftest import settings_for


async def test_an_issued_token_authenticates_in_its_tenant(local_services: LocalServices) -> None:
    settings = settings_for(local_services)
    token = await issue(settings, "acme", Role.USER, "ops", "olivia")
    client = connect(settings.mongo)
    try:
        tokens = TokenRepository(client[settings.mongo.database], "", "default")
        principal = await tokens.resolve(token)
        assert principal is not None
        assert (principal.tenant_id, principal.role, principal.user_id) == (
            "acme",
            Role.USER,
            "olivia",
        )
        assert await tokens.resolve(token + "x") is None
    finally:
        await client.drop_database(settings.mongo.database)
        await client.close()

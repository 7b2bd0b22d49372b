"""Issues an API token for any tenant: `python -m ragline.tokens_cli --tenant acme --role admin`
(a user's: `--role user --user-id alice`).

An operator's tool (it writes to MongoDB directly); admins issue tokens for their own tenant
through `POST /api/v1/tokens`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AsyncExitStack

from infra.settings import Settings
from ragline.system import System
from schemas.domain import Role


async def issue(
    settings: Settings, tenant: str, role: Role, name: str, user_id: str | None = None
) -> str:
    """Creates the token (registering its user) and returns its secret."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        _, token = await system.token_service.issue(tenant, name, role, user_id)
        return token


def main(argv: list[str] | None = None) -> int:
    """Parses arguments, issues the token, prints it."""
    parser = argparse.ArgumentParser(prog="python -m ragline.tokens_cli")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--role", choices=[r.value for r in Role], default=Role.ADMIN.value)
    parser.add_argument("--name", default="issued from the command line")
    parser.add_argument("--user-id", help="the person the token stands for (needed for a user)")
    args = parser.parse_args(argv)
    if args.role == Role.USER.value and not args.user_id:
        parser.error("a user token needs --user-id")
    token = asyncio.run(issue(Settings(), args.tenant, Role(args.role), args.name, args.user_id))
    sys.stdout.write(token + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

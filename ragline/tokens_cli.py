"""Issues an API token for any tenant: `python -m ragline.tokens_cli --tenant acme --role admin`.

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


async def issue(settings: Settings, tenant: str, role: Role, name: str) -> str:
    """Creates the token and returns its secret."""
    async with AsyncExitStack() as stack:
        _, token = await System(settings, stack).tokens.issue(tenant, role, name)
        return token


def main(argv: list[str] | None = None) -> int:
    """Parses arguments, issues the token, prints it."""
    parser = argparse.ArgumentParser(prog="python -m ragline.tokens_cli")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--role", choices=[r.value for r in Role], default=Role.ADMIN.value)
    parser.add_argument("--name", default="issued from the command line")
    args = parser.parse_args(argv)
    token = asyncio.run(issue(Settings(), args.tenant, Role(args.role), args.name))
    sys.stdout.write(token + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs the relay: `python -m workers.relay`."""

from __future__ import annotations

import asyncio

from infra.settings import Settings
from workers.relay.app import run


def main() -> None:
    """Builds the settings and runs the relay until SIGINT or SIGTERM."""
    asyncio.run(run(Settings()))


if __name__ == "__main__":
    main()

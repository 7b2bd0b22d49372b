"""Runs the crawl worker: `python -m workers.crawl`."""

from __future__ import annotations

import asyncio

from infra.settings import Settings
from workers.crawl.app import create_app


def main() -> None:
    """Builds the settings and runs the worker until SIGINT or SIGTERM."""
    asyncio.run(create_app(Settings()).run())


if __name__ == "__main__":
    main()

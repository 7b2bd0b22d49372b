"""Runs the API: `python -m api`."""

from __future__ import annotations

import uvicorn

from api.app import create_app
from infra.settings import Settings


def main() -> None:
    """Builds the settings and serves the app until SIGINT or SIGTERM."""
    settings = Settings()
    uvicorn.run(
        create_app(settings),
        host=settings.api.host,
        port=settings.api.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()

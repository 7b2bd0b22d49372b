"""The MCP server on its own: `python -m ragline.mcp [--host H] [--port P]`.

The API process serves `/mcp` already; this runs the same server without the REST API, e.g.
to scale agents' traffic separately. It searches the configured vector store, so with the
embedded store (the local default) it must not run beside the API process, which owns that
store; with a Qdrant server any number of them may run.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import uvicorn
from starlette.applications import Starlette

from api.mcp import KnowledgeMcp
from api.state import Services
from infra.kafka.client import build_broker
from infra.process.logs import configure_logging
from infra.settings import Settings
from ragline.process import open_process


def build_app(settings: Settings) -> Starlette:
    """The MCP app, opening the system for its lifetime."""
    opened: dict[str, Services] = {}
    mcp = KnowledgeMcp(lambda: opened.get("services"))
    app = mcp.app(
        issuer_url=f"http://{settings.api.host}:{settings.api.port}",
        allowed_hosts=settings.api.mcp_allowed_hosts,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            broker = build_broker(settings.kafka, "ragline-mcp")
            system = await open_process(settings, "mcp", stack, broker, metrics_server=False)
            await broker.start()
            stack.push_async_callback(broker.stop)
            await system.open_embedder()
            await system.open_vector_store()
            opened["services"] = system
            async with mcp.session_manager.run():
                yield
            opened.clear()

    app.router.lifespan_context = lifespan
    return app


def main(argv: list[str] | None = None) -> None:
    """Serves `/mcp` until stopped."""
    settings = Settings()
    parser = argparse.ArgumentParser(prog="python -m ragline.mcp")
    parser.add_argument("--host", default=settings.api.host)
    parser.add_argument("--port", type=int, default=settings.api.port)
    args = parser.parse_args(argv)
    configure_logging(settings.log_level)
    uvicorn.run(build_app(settings), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

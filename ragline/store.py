"""The store process: `python -m ragline.store` serves the embedded vector stores (one per
generation: `schemas.index_generations`, each opened by its first caller) on a Unix socket
(`qdrant.store_socket`) to the API process and the index worker of one machine
(`infra.vectorstore.remote`). It owns the engine: its optimiser runs here, beside nobody's
requests. Like every Ragline process it gives malloc's free memory back periodically, answers
the memory trace's signal and serves `/metrics` on `metrics_port` (its memory among them)."""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack

from infra.process.basics import open_process_basics
from infra.settings import Settings
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.factory import embedded_store, store_path
from infra.vectorstore.remote import StoreServer

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    """Opens the store and serves it until SIGINT or SIGTERM."""
    socket = settings.qdrant.store_socket
    if socket is None:
        raise SystemExit("the store process needs RAGLINE_QDRANT__STORE_SOCKET")
    async with AsyncExitStack() as stack:
        await open_process_basics(settings, "store", stack)

        def open_store(name: str, dimensions: int) -> EdgeVectorStore:
            return embedded_store(settings, store_path(settings, name), dimensions)

        server = StoreServer(open_store, socket)
        stack.push_async_callback(server.close)  # and with it, the stores it opened
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await server.start()
        await stop.wait()


def main() -> None:
    """Builds the settings and serves the store."""
    asyncio.run(serve(Settings()))


if __name__ == "__main__":
    main()

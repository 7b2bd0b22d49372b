"""The store process: `python -m ragline.store` serves the embedded vector store on a Unix socket
(`qdrant.store_socket`) to the API process and the index worker of one machine
(`infra.vectorstore.remote`). It owns the engine: its optimiser runs here, beside nobody's
requests. Like every Ragline process it gives malloc's free memory back periodically, answers
the memory trace's signal and serves `/metrics` on `metrics_port` (its memory among them)."""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from pathlib import Path

from infra.process.basics import open_process_basics
from infra.settings import Settings
from infra.vectorstore.factory import embedded_store
from infra.vectorstore.remote import StoreServer

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    """Opens the store and serves it until SIGINT or SIGTERM."""
    if settings.qdrant.store_socket is None:
        raise SystemExit("the store process needs RAGLINE_QDRANT__STORE_SOCKET")
    async with AsyncExitStack() as stack:
        await open_process_basics(settings, "store", stack)
        await serve_store(settings, settings.qdrant.store_socket)


async def serve_store(settings: Settings, socket: Path) -> None:
    """Opens the embedded store and serves it on `socket` until SIGINT or SIGTERM."""
    store = embedded_store(settings)
    await store.ensure_collection()
    server = StoreServer(store, socket)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
        await stop.wait()
    finally:
        await server.close()
        await store.close()


def main() -> None:
    """Builds the settings and serves the store."""
    asyncio.run(serve(Settings()))


if __name__ == "__main__":
    main()

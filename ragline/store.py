"""The store process: `python -m ragline.store` serves the embedded vector store on a Unix socket
(`qdrant.store_socket`) to the API process and the index worker of one machine
(`infra.vectorstore.remote`). It owns the engine: its optimiser runs here, beside nobody's
requests."""

from __future__ import annotations

import asyncio
import logging
import signal

from infra.process.logs import configure_logging
from infra.settings import Settings
from infra.vectorstore.factory import embedded_store
from infra.vectorstore.remote import StoreServer

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    """Opens the store and serves it until SIGINT or SIGTERM."""
    if settings.qdrant.store_socket is None:
        raise SystemExit("the store process needs RAGLINE_QDRANT__STORE_SOCKET")
    store = embedded_store(settings)
    await store.ensure_collection()
    server = StoreServer(store, settings.qdrant.store_socket)
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
    settings = Settings()
    configure_logging(settings.log_level)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()

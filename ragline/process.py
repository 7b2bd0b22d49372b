"""Opening a Ragline process: the start-up steps every entry point takes (the API, the MCP
server, each worker, the relay), in one order, in one place."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack

from faststream.kafka import KafkaBroker

from core.errors import ServiceUnavailable
from infra.kafka.client import ensure_topics
from infra.mongo.indexes import ensure_indexes
from infra.process.basics import open_process_basics
from infra.settings import Settings
from ragline.system import System
from schemas.topics import ALL_TOPICS

log = logging.getLogger(__name__)

# How long a process starting waits for MongoDB to answer before it gives up (and its
# supervisor starts it again): a start during a short outage waits it out rather than
# exiting, which would make the outage longer by a whole new start.
START_PATIENCE_S = 60.0


async def open_process(
    settings: Settings,
    name: str,
    stack: AsyncExitStack,
    broker: KafkaBroker,
    *,
    metrics_server: bool = True,
) -> System:
    """Opens the process `name` over `broker` (which the caller starts once it has subscribed
    what it consumes) for as long as `stack` is open: what every process has
    (`open_process_basics`), Kafka's topics, the system and MongoDB's indexes."""
    await open_process_basics(settings, name, stack, metrics_server=metrics_server)
    if settings.kafka.create_topics:
        await ensure_topics(settings.kafka, ALL_TOPICS)
    system = System(settings, stack, broker)
    deadline = time.monotonic() + START_PATIENCE_S
    while True:
        try:
            await ensure_indexes(system.db)
            return system
        except ServiceUnavailable as exc:
            if time.monotonic() >= deadline:
                raise
            log.warning("%s: waiting for MongoDB to start: %s", name, exc)
            await asyncio.sleep(1.0)

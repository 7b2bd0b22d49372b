"""Opening a Ragline process: the start-up steps every entry point takes (the API, the MCP
server, each worker, the relay), in one order, in one place."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TypeVar

from faststream.kafka import KafkaBroker

from core.errors import ServiceUnavailable
from infra.kafka.client import ensure_topics
from infra.mongo.indexes import ensure_indexes
from infra.process.basics import open_process_basics
from infra.settings import Settings
from ragline.system import System
from schemas.topics import ALL_TOPICS

log = logging.getLogger(__name__)
T = TypeVar("T")

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
    await through_outages(lambda: ensure_indexes(system.db), name, START_PATIENCE_S)
    return system


async def through_outages(
    attempt: Callable[[], Awaitable[T]], name: str, patience_s: float, pause_s: float = 1.0
) -> T:
    """`attempt`'s result, tried again every `pause_s` while a service it needs is unavailable,
    until `patience_s` have passed (then its last error)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await attempt()
        except ServiceUnavailable as exc:
            if time.monotonic() + pause_s > deadline:
                raise
            log.warning("%s: waiting for %s: %s", name, exc.service, exc.detail)
            await asyncio.sleep(pause_s)

"""Opening a Ragline process: the start-up steps every entry point takes (the API, the MCP
server, each worker, the relay), in one order, in one place."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream.kafka import KafkaBroker

from infra.kafka.client import ensure_topics
from infra.mongo.indexes import ensure_indexes
from infra.process.basics import open_process_basics
from infra.settings import Settings
from ragline.system import System
from schemas.topics import ALL_TOPICS


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
    await ensure_indexes(system.db)
    return system

"""Opening a Ragline process: the start-up steps every entry point takes (the API, the MCP
server, each worker, the relay), in one order, in one place."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream.kafka import KafkaBroker

from infra.kafka.client import ensure_topics
from infra.mongo.client import ensure_indexes
from infra.process.logs import configure_logging
from infra.process.malloc import releasing_free_memory
from infra.process.memory_trace import trace_memory
from infra.process.metrics import serve_metrics
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
    what it consumes) for as long as `stack` is open: logging, the memory trace, Kafka's topics,
    the system, MongoDB's indexes, the periodic release of free memory and, with
    `metrics_server`, `/metrics` on a port of its own (the API serves it on its HTTP port)."""
    configure_logging(settings.log_level)
    trace_memory(settings.memory_trace_frames, settings.run_dir, name)
    if settings.kafka.create_topics:
        await ensure_topics(settings.kafka, ALL_TOPICS)
    system = System(settings, stack, broker)
    await ensure_indexes(system.db)
    await stack.enter_async_context(releasing_free_memory(settings.release_free_memory_every_s))
    if metrics_server:
        serve_metrics(settings.metrics_host, settings.metrics_port)
    return system

"""Wires stage handlers to Kafka: the only place that knows FastStream and the clients."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from faststream import AckPolicy, FastStream
from faststream.kafka import KafkaBroker, KafkaMessage
from pydantic import BaseModel

from core.errors import ServiceUnavailable
from infra.blob_store import BlobStore
from infra.documents import DocumentRepository
from infra.kafka import build_broker, consumer_options, ensure_topics
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.lifecycle import DocumentLifecycle
from infra.logs import configure_logging
from infra.metrics import ASSIGNED_PARTITIONS, CONSUMER_LAG, serve_metrics
from infra.mongo import connect
from infra.search_cache import SearchCache, connect_redis
from infra.settings import Settings
from schemas.events import Event
from schemas.topics import ALL_TOPICS, STAGE_INPUTS, dead_letter_topic, topic_of
from workers.ports import DocumentStatus, Publish, StageResult
from workers.runtime import DeadLetter, Stage, StageRunner

log = logging.getLogger(__name__)


class PipelineResources:
    """Clients and repositories a stage process opens once and shares."""

    def __init__(self, settings: Settings, broker: KafkaBroker) -> None:
        self.settings = settings
        self.broker = broker
        self.client = connect(settings.mongo)
        db = self.client[settings.mongo.database]
        self.db = db
        # Told of every KB revision a stage makes, so cached answers go out of date.
        self.search_cache = SearchCache(connect_redis(settings.redis), settings.search)
        self.documents = DocumentRepository(db, settings.ingest.parse_error_max_chars)
        self.kbs = KnowledgeBaseRepository(db, self.search_cache)
        self.blobs = BlobStore(db)
        self.lifecycle = DocumentLifecycle(self.client, db, self.search_cache)

    async def close(self) -> None:
        """Closes the Mongo and Redis clients."""
        await self.client.close()
        await self.search_cache.close()


def kafka_publisher(broker: KafkaBroker) -> Publish:
    """Publishes events to their topics, keyed by document id."""

    async def publish(events: Sequence[Event]) -> None:
        # Sent together (the producer batches them); each call returns once all are acked.
        try:
            await asyncio.gather(
                *(
                    broker.publish(
                        event.model_dump_json().encode(),
                        topic_of(event),
                        key=event.key,
                        headers={"content-type": "application/json"},
                    )
                    for event in events
                )
            )
        except KafkaError as exc:
            raise ServiceUnavailable("kafka", str(exc)) from exc

    return publish


def kafka_dead_letter(broker: KafkaBroker, stage: str) -> DeadLetter:
    """Sends a message a stage gave up on to the stage's dead-letter topic, with why."""

    async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
        try:
            await broker.publish(
                raw,
                dead_letter_topic(stage),
                key=headers.get("document_id", "").encode() or None,
                headers={key: value[:1000] for key, value in headers.items()},
            )
        except KafkaError as exc:
            raise ServiceUnavailable("kafka", str(exc)) from exc

    return dead_letter


def _report_lag(stage: str, message: KafkaMessage) -> None:
    record: Any = message.raw_message
    consumer: Any = getattr(message, "consumer", None)
    if consumer is None or isinstance(record, tuple):
        return
    # The high watermark of fetched data; the broker's reported end offsets are not trusted.
    highwater = consumer.highwater(TopicPartition(record.topic, record.partition))
    if highwater is not None:
        CONSUMER_LAG.labels(stage, str(record.partition)).set(max(highwater - record.offset - 1, 0))


class AssignmentTracker(ConsumerRebalanceListener):  # type: ignore[misc]
    """Keeps `ragline_assigned_partitions` current through group rebalances."""

    def __init__(self, stage: str) -> None:
        self._stage = stage
        self._owned: set[tuple[str, int]] = set()
        ASSIGNED_PARTITIONS.labels(stage).set(0)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Forgets partitions taken away (all of this process's consumers share this)."""
        self._owned -= {(tp.topic, tp.partition) for tp in revoked}
        ASSIGNED_PARTITIONS.labels(self._stage).set(len(self._owned))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Counts partitions handed over."""
        self._owned |= {(tp.topic, tp.partition) for tp in assigned}
        ASSIGNED_PARTITIONS.labels(self._stage).set(len(self._owned))


class RunnerSlot:
    """Holds a stage's runner, which can only be built once the process has started."""

    def __init__(self) -> None:
        self.runner: StageRunner[Any] | None = None

    def get(self) -> StageRunner[Any]:
        """The runner; the subscriber only starts after it is set."""
        if self.runner is None:
            raise RuntimeError("stage runner used before start-up")
        return self.runner


def subscribe_stage(
    broker: KafkaBroker, settings: Settings, stage: str, slot: RunnerSlot, concurrency: int = 1
) -> None:
    """Subscribes the stage's input topic in the stage's consumer group.

    With `concurrency` above 1 the process joins the group with that many consumers, each
    working through its own partitions, so messages of different partitions overlap.
    """
    options = consumer_options(settings.kafka, stage)
    # On an error the runner could not even record, rewind so the message comes back.
    options["ack_policy"] = AckPolicy.NACK_ON_ERROR
    options["listener"] = AssignmentTracker(stage)
    if concurrency > 1:
        options["max_workers"] = concurrency

    @broker.subscriber(STAGE_INPUTS[stage], **options)  # type: ignore[untyped-decorator]
    async def consume(message: KafkaMessage) -> None:
        _report_lag(stage, message)
        await slot.get().run(message.body)


HandlerFactory = Callable[
    [PipelineResources, AsyncExitStack], Awaitable[Callable[[Any], Awaitable[StageResult]]]
]


def build_runner(
    broker: KafkaBroker,
    settings: Settings,
    stage: str,
    event_type: type[BaseModel],
    handler: Callable[[Any], Awaitable[StageResult]],
    documents: DocumentStatus,
) -> StageRunner[Any]:
    """A runner for one stage with Kafka publishing and dead-lettering."""
    return StageRunner(
        Stage(stage, event_type, handler),
        documents,
        kafka_publisher(broker),
        kafka_dead_letter(broker, stage),
        settings.ingest,
    )


def stage_app(
    settings: Settings,
    stage: str,
    event_type: type[BaseModel],
    make_handler: HandlerFactory,
    concurrency: int = 1,
) -> FastStream:
    """A worker process for one stage: broker, subscriber, lifespan, metrics."""
    configure_logging(settings.log_level)
    broker = build_broker(settings.kafka, f"ragline-{stage}")
    slot = RunnerSlot()
    subscribe_stage(broker, settings, stage, slot, concurrency)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if settings.kafka.create_topics:
                await ensure_topics(settings.kafka, ALL_TOPICS)
            resources = PipelineResources(settings, broker)
            stack.push_async_callback(resources.close)
            handler = await make_handler(resources, stack)
            slot.runner = build_runner(
                broker, settings, stage, event_type, handler, resources.documents
            )
            serve_metrics(settings.metrics_host, settings.metrics_port)
            log.info("%s worker ready", stage)
            yield

    return FastStream(broker, lifespan=lifespan)

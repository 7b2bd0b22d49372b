"""Kafka: topic creation, broker construction and consumer options (FastStream over aiokafka)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.protocol.metadata import MetadataRequest
from faststream import AckPolicy
from faststream.kafka import KafkaBroker

from core.errors import ServiceUnavailable
from infra.settings.kafka import KafkaSettings
from schemas.events import DeadLetter, Event, Publish, Send
from schemas.topics import ALL_TOPICS, BROKER_MARKER, dead_letter_topic, topic_of

log = logging.getLogger(__name__)


async def broker_is_new(settings: KafkaSettings) -> bool:
    """True (once) when the broker lacks the marker topic: it is new, or it lost its topics
    and messages in a restart. The pipeline's topics are (re)created then, and the marker."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        await admin.start()
        if BROKER_MARKER in set(await admin.list_topics()):
            return False
    except KafkaError as exc:
        raise ServiceUnavailable("kafka", str(exc)) from exc
    finally:
        await admin.close()
    await ensure_topics(settings, ALL_TOPICS)
    await ensure_topics(settings, [BROKER_MARKER], partitions=1)
    return True


async def ensure_topics(
    settings: KafkaSettings, topics: Iterable[str], partitions: int | None = None
) -> None:
    """Creates missing topics with the configured partition count.

    Auto-created topics may get a single partition, which would stop consumers of one group
    from sharing the load, so topics are always created explicitly.
    """
    wanted = list(dict.fromkeys(topics))
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        missing = [name for name in wanted if name not in existing]
        if missing:
            try:
                await admin.create_topics(
                    [
                        NewTopic(
                            name,
                            num_partitions=partitions or settings.partitions,
                            replication_factor=settings.replication_factor,
                            topic_configs={"max.message.bytes": str(settings.max_message_bytes)},
                        )
                        for name in missing
                    ]
                )
            except TopicAlreadyExistsError:
                log.info("topics created concurrently by another process")
        await _warn_of_fewer_partitions(
            admin, [name for name in wanted if name in existing], partitions or settings.partitions
        )
    except KafkaError as exc:
        raise ServiceUnavailable("kafka", str(exc)) from exc
    finally:
        await admin.close()


async def _warn_of_fewer_partitions(
    admin: AIOKafkaAdminClient, topics: list[str], wanted: int
) -> None:
    """Logs each topic with fewer partitions than configured (one a broker created with its own
    default count, for a client that is not Ragline's, or an operator). Its consumers share
    less of the load than they could; an operator adds partitions (the local broker cannot)."""
    if not topics:
        return
    for topic in await admin.describe_topics(topics):
        count = len(topic.get("partitions") or [])
        if 0 < count < wanted:
            log.warning(
                "topic %s has %d partitions, %d configured: add partitions to share its load",
                topic.get("topic"), count, wanted,
            )  # fmt: skip


def forbid_topic_auto_creation() -> None:
    """Has every Kafka client of this process ask for topics without creating them (the Java
    client's `allow.auto.create.topics=false`; aiokafka has no such setting, and its metadata
    requests always allow creation). A broker that lost its topics would otherwise create a
    topic a consumer asks for with its own default partition count (the local broker: 4),
    while producers go on sending to the configured partitions (6), some of which no
    consumer then owns. Ragline creates its topics itself (`ensure_topics`: at start-up, and
    by the relay when the broker begins a new life)."""
    if getattr(MetadataRequest, "_ragline_no_auto_creation", False):
        return
    allowing = MetadataRequest.__init__

    def never_creating(
        self: MetadataRequest, topics: list[str] | None = None, allow: bool | None = None
    ) -> None:
        allowing(self, topics, False if allow is None else allow)

    MetadataRequest.__init__ = never_creating
    MetadataRequest._ragline_no_auto_creation = True


def build_broker(settings: KafkaSettings, client_id: str) -> KafkaBroker:
    """A FastStream broker; per-message logs go to DEBUG. Its clients never have the broker
    create a topic (`forbid_topic_auto_creation`)."""
    forbid_topic_auto_creation()
    return KafkaBroker(
        settings.bootstrap_servers,
        client_id=client_id,
        # After a broker lost its topics, they may come back with other partitions: producers
        # and consumers learn them within this (a producer that kept the old ones would go on
        # sending to partitions no consumer owns).
        metadata_max_age_ms=settings.metadata_max_age_ms,
        max_request_size=settings.max_message_bytes,
        # Messages are small, and mostly vectors that do not compress: no compression saves
        # CPU in every stage.
        log_level=logging.DEBUG,
    )


def consumer_options(settings: KafkaSettings, stage: str) -> dict[str, Any]:
    """Subscriber options shared by every stage: a group per stage, commit after success."""
    return {
        "group_id": f"{settings.group_prefix}.{stage}",
        "ack_policy": AckPolicy.ACK,
        # The local broker reports wrong end offsets; start from the committed or first
        # offset, never from "latest".
        "auto_offset_reset": "earliest",
        "session_timeout_ms": settings.session_timeout_ms,
        "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        "fetch_max_wait_ms": settings.fetch_max_wait_ms,
        "max_partition_fetch_bytes": settings.max_message_bytes,
        # Long documents keep a worker busy; rebalancing it away mid-batch would only
        # duplicate work.
        "max_poll_interval_ms": 10 * 60 * 1000,
    }


def kafka_publisher(broker: KafkaBroker, timeout_s: float) -> Publish:
    """Publishes events to their topics, keyed by document id; `ServiceUnavailable` when
    Kafka has not acknowledged them all within `timeout_s`."""

    async def publish(events: Sequence[Event]) -> None:
        # Sent together (the producer batches them); each call returns once all are acked.
        async with acknowledged_within(timeout_s):
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

    return publish


def kafka_sender(broker: KafkaBroker, timeout_s: float) -> Send:
    """Sends one message to a topic (returns once Kafka has acknowledged it)."""

    async def send(topic: str, key: bytes, value: bytes) -> None:
        async with acknowledged_within(timeout_s):
            await broker.publish(
                value, topic, key=key, headers={"content-type": "application/json"}
            )

    return send


def kafka_dead_letter(broker: KafkaBroker, stage: str, timeout_s: float) -> DeadLetter:
    """Sends a message a stage gave up on to the stage's dead-letter topic, with why."""

    async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
        async with acknowledged_within(timeout_s):
            await broker.publish(
                raw,
                dead_letter_topic(stage),
                key=headers.get("document_id", "").encode() or None,
                headers={key: value[:1000] for key, value in headers.items()},
            )

    return dead_letter


@asynccontextmanager
async def acknowledged_within(timeout_s: float) -> AsyncIterator[None]:
    """Kafka's errors, and no acknowledgement within `timeout_s`, as `ServiceUnavailable`."""
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except KafkaError as exc:
        raise ServiceUnavailable("kafka", str(exc)) from exc
    except TimeoutError as exc:
        raise ServiceUnavailable(
            "kafka", f"no acknowledgement from Kafka within {timeout_s:g} s"
        ) from exc

"""Kafka settings: brokers, topics, consumers and producers."""

from __future__ import annotations

from pydantic import BaseModel, Field


class KafkaSettings(BaseModel):
    """Kafka connection and consumer tuning."""

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        description="Kafka brokers to connect to, as comma-separated host:port pairs.",
    )
    partitions: int = Field(
        default=6, ge=1, description="Partitions of every topic Ragline creates (count)."
    )
    replication_factor: int = Field(
        default=1, ge=1, description="Replicas of every topic Ragline creates (count)."
    )
    create_topics: bool = Field(
        default=True,
        description="Create the missing topics at start-up, with `partitions` partitions each.",
    )
    # Group joins take about session_timeout_ms / 2, so tests set it low on the local broker.
    session_timeout_ms: int = Field(
        default=10_000,
        ge=500,
        description=(
            "Consumer group session timeout (ms); real Kafka's minimum is 6000, the local "
            "broker accepts lower values."
        ),
    )
    heartbeat_interval_ms: int = Field(
        default=3_000,
        ge=100,
        description="Time between a consumer's heartbeats to its group (ms).",
    )
    metadata_max_age_ms: int = Field(
        default=15_000,
        ge=1_000,
        description=(
            "How old a client's view of the topics and their partitions may get before it asks "
            "the broker again (ms; Kafka's default is 300000). A broker that lost its topics "
            "may bring them back with another partition count: until producers see it, what "
            "they send to partitions that no longer exist reaches no consumer."
        ),
    )
    fetch_max_wait_ms: int = Field(
        default=500,
        ge=0,
        description=(
            "Longest time a fetch waits for new messages (ms). Kafka answers a fetch as soon "
            "as a message arrives, so this only sets how often an idle consumer asks; the "
            "local broker answers only when the wait ends, so there produce-to-consume "
            "latency is about half of it (the local stack uses 250)."
        ),
    )
    max_message_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=64 * 1024,
        description=(
            "Largest message a producer sends and a consumer fetches per partition, and the "
            "`max.message.bytes` of created topics (bytes)."
        ),
    )
    group_prefix: str = Field(
        default="ragline",
        description="Prefix of the consumer group names; each stage's group is `<prefix>.<stage>`.",
    )
    publish_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "Longest wait for Kafka to acknowledge what a stage publishes (s); past it the try "
            "fails as Kafka being unavailable (retried, then the message comes back) instead "
            "of the stage waiting on a producer that never answers."
        ),
    )
    send_timeout_s: float = Field(
        default=3.0,
        gt=0,
        description=(
            "How long an accepted change waits for Kafka to acknowledge its events before "
            "leaving them to the relay (s); the request answers either way."
        ),
    )

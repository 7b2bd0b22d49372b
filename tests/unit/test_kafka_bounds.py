"""What a stage publishes is bounded in time: a producer that never answers (as one did after
the local broker restarted) fails the try as Kafka being unavailable, which the stage runtime
retries and then leaves for redelivery, instead of the stage waiting for ever."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import numpy as np
import pytest
from aiokafka.errors import KafkaConnectionError
from faststream.kafka import KafkaBroker

from core.errors import ServiceUnavailable
from infra.kafka.client import kafka_dead_letter, kafka_publisher, kafka_sender
from schemas.domain import ChunkRecord
from schemas.events import ChunkBatchEmbedded


class SilentBroker:
    """A broker whose acknowledgement never comes (or that fails as told)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.sent = 0

    async def publish(self, *args: Any, **kwargs: Any) -> None:
        self.sent += 1
        if self.error is not None:
            raise self.error
        await asyncio.Event().wait()


def _event() -> ChunkBatchEmbedded:
    chunk = ChunkRecord(chunk_index=0, text="t", start=0, end=1)
    return ChunkBatchEmbedded(
        tenant_id="t", kb_id="kb", document_id="doc", generation=1, batch_index=0, last=True,
        chunks=[chunk], model="m", dimensions=2,
        dense_b64=ChunkBatchEmbedded.encode_vectors(np.ones((1, 2), dtype=np.float32)),
        **ChunkBatchEmbedded.encode_sparse([([], [])]),
    )  # fmt: skip


async def test_no_acknowledgement_within_the_bound_is_kafka_unavailable() -> None:
    broker = SilentBroker()
    as_broker = cast(KafkaBroker, broker)
    calls = [
        kafka_publisher(as_broker, 0.05)([_event(), _event()]),
        kafka_sender(as_broker, 0.05)("topic", b"k", b"v"),
        kafka_dead_letter(as_broker, "embed", 0.05)(b"raw", {"document_id": "doc"}),
    ]
    for call in calls:
        async with asyncio.timeout(5):
            with pytest.raises(ServiceUnavailable, match=r"within 0\.05 s") as refused:
                await call
        assert refused.value.service == "kafka"
        assert refused.value.platform
    assert broker.sent == 4


async def test_kafka_errors_are_kafka_unavailable() -> None:
    broker = cast(KafkaBroker, SilentBroker(KafkaConnectionError("broker gone")))
    with pytest.raises(ServiceUnavailable, match="broker gone"):
        await kafka_sender(broker, 5.0)("topic", b"k", b"v")

"""Which life of the Kafka broker the pipeline is in.

A broker that loses its topics and messages in a restart (the local one keeps them in memory)
starts a new life. The relay finds it new (`infra.kafka.client.broker_is_new`) and records a
new epoch here before it re-drives what was in flight. A stage's consumers may still hold
positions from the broker's previous life, and a position that falls inside the new log's range
would skip the messages before it (the re-driven events among them), so every stage worker
reads the epoch as it checks its consumers and, when it has changed, reads its partitions again
from the start (`workers.hosting`; every stage skips what it has already done).
"""

from __future__ import annotations

from uuid import uuid4

from infra.mongo.client import Database, mongo_errors
from schemas.domain import utcnow

EPOCH_ID = "kafka"


class BrokerEpoch:
    """The current epoch of the broker, in MongoDB (one document)."""

    def __init__(self, db: Database) -> None:
        self._epochs = db["broker_epochs"]

    async def begin(self) -> str:
        """Records a new epoch (the broker came back without its messages); returns it."""
        epoch = uuid4().hex
        async with mongo_errors():
            await self._epochs.update_one(
                {"_id": EPOCH_ID}, {"$set": {"epoch": epoch, "began_at": utcnow()}}, upsert=True
            )
        return epoch

    async def current(self) -> str | None:
        """The current epoch; None before the first is recorded."""
        async with mongo_errors():
            found = await self._epochs.find_one({"_id": EPOCH_ID})
        return None if found is None else str(found["epoch"])

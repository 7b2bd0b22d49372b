"""Settings of the pipeline's stages and the relay: retries, time limits, re-drives."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


class StagePolicy(BaseModel):
    """How a stage treats one message: tries of a retryable error, and the time one try may
    take before the document fails (so a pathological file cannot hold a partition); and how
    many messages one process works at once."""

    max_attempts: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Tries a message gets for a retryable error, with backoff between (count).",
    )
    time_limit_s: float = Field(
        default=300.0,
        gt=0,
        description="Time one try may take before the document fails with that reason (s).",
    )
    # Messages worked at once share their status writes (`infra.mongo.document_repository`):
    # the more in flight, the fewer MongoDB round trips each costs.
    concurrency: int = Field(
        default=1,
        ge=1,
        le=256,
        description=(
            "Messages one process works at once: read together with `batches`, else each from "
            "its own partitions (beyond the topic's partitions, `kafka.partitions`, the rest "
            "stay idle; at most 64) (count)."
        ),
    )
    batches: bool = Field(
        default=False,
        description=(
            "Read the stage's messages in batches of up to `concurrency` with one Kafka "
            "consumer, and work them at once (those of one document or record in order); the "
            "next batch is read once the whole batch is done, so for short messages only."
        ),
    )

    @model_validator(mode="after")
    def _consumers_are_bounded(self) -> StagePolicy:
        if not self.batches and self.concurrency > 64:
            raise ValueError(
                f"concurrency {self.concurrency} without batches would start as many Kafka "
                "consumers: at most 64"
            )
        return self


class StageSettings(BaseModel):
    """Each stage's policy (`RAGLINE_STAGES__EXTRACT__TIME_LIMIT_S=...`)."""

    records: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=60, concurrency=64, batches=True),
        description=(
            "Records stage: one connector record from `records.ingest.v1`, upserted as a document."
        ),
    )
    crawl: StagePolicy = Field(
        # One host is still fetched one request at a time, with its delay.
        default=StagePolicy(max_attempts=3, time_limit_s=120, concurrency=4),
        description=(
            "Crawl stage: one URL, its robots check, the fetch (within crawl.fetch_timeout_s) "
            "and its hand-off to ingestion."
        ),
    )
    extract: StagePolicy = Field(
        # Each message in flight has a parser process of its own (`ingest.parser_memory_mb`).
        default=StagePolicy(max_attempts=3, time_limit_s=600, concurrency=3),
        description="Extract stage: parsing and OCR of a file, the slowest work of the pipeline.",
    )
    chunk: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=300, concurrency=16, batches=True),
        description="Chunk stage: a batch may wait on a language model for its chunk contexts.",
    )
    embed: StagePolicy = Field(
        # Batches in flight share one call of the model (`workers.embed.handler`).
        default=StagePolicy(max_attempts=3, time_limit_s=300, concurrency=16, batches=True),
        description="Embed stage: one batch of chunks turned into vectors.",
    )
    index: StagePolicy = Field(
        # The API process hosts it by default: one consumer reading batches starts sooner than
        # one per message at once (six of those made a killed API a second slower to serve
        # searches again).
        default=StagePolicy(max_attempts=5, time_limit_s=120, concurrency=32, batches=True),
        description=(
            "Index stage: writes to the vector store and MongoDB only, so a slow try means a "
            "service is struggling."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _over_the_stage_defaults(cls, data: Any) -> Any:
        """A stage's variables change only the fields they name; the others keep the stage's
        defaults (`..._INDEX__MAX_ATTEMPTS=7` leaves the index stage's 120 s limit)."""
        if not isinstance(data, dict):
            return data
        merged = dict(data)
        for name, field in cls.model_fields.items():
            given = data.get(name)
            if isinstance(given, dict) and isinstance(field.default, StagePolicy):
                merged[name] = {**field.default.model_dump(), **given}
        return merged

    def of(self, stage: str) -> StagePolicy:
        """The policy of a stage by name."""
        policy = getattr(self, stage, None)
        if not isinstance(policy, StagePolicy):
            raise KeyError(f"no stage named {stage!r}")
        return policy


class RelaySettings(BaseModel):
    """The relay process (`python -m workers relay`): sends the outbox's events to Kafka and
    re-drives documents that stopped moving."""

    poll_s: float = Field(default=0.5, gt=0, description="How often the outbox is read (s).")
    # Younger entries are being sent by the process that wrote them.
    send_after_s: float = Field(
        default=2.0,
        ge=0,
        description="Age an outbox entry must reach before the relay sends it (s).",
    )
    batch: int = Field(
        default=200,
        ge=1,
        le=5_000,
        description="Outbox entries read and sent at a time (count).",
    )
    reconcile_every_s: float = Field(
        default=5.0,
        gt=0,
        description="How often the broker and the documents in progress are checked (s).",
    )
    max_redrives: int = Field(
        default=3,
        ge=0,
        le=20,
        description=(
            "Restarts of a stuck document counted against it (other documents moved while it "
            "did not) before it fails with a reason (count)."
        ),
    )
    max_uncounted_redrives: int = Field(
        default=6,
        ge=0,
        le=30,
        description=(
            "Restarts of a stuck document not counted against it (nothing else moved either: "
            "an outage, or the only document in progress) before it fails with a reason; at "
            "least `max_redrives` (count)."
        ),
    )

    @model_validator(mode="after")
    def _uncounted_bound_is_larger(self) -> RelaySettings:
        if self.max_uncounted_redrives < self.max_redrives:
            raise ValueError(
                f"relay.max_uncounted_redrives ({self.max_uncounted_redrives}) must be at least "
                f"relay.max_redrives ({self.max_redrives})"
            )
        return self

"""All of Ragline's settings: one root model (`Settings`), with each area's in a module of its
own beside it (`infra/settings/<area>.py`).

Every process builds one `Settings` in its entry point and passes it down. Values come from
environment variables prefixed `RAGLINE_`, nested with `__`
(e.g. `RAGLINE_KAFKA__BOOTSTRAP_SERVERS`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from infra.settings.api import ApiSettings, LimitsSettings
from infra.settings.crawl import CrawlSettings
from infra.settings.embedding import EmbeddingSettings
from infra.settings.generations import GenerationSettings
from infra.settings.ingest import ChunkingSettings, ContextualSettings, IngestSettings
from infra.settings.kafka import KafkaSettings
from infra.settings.mongo import MongoSettings
from infra.settings.redis import RedisSettings
from infra.settings.search import SearchSettings
from infra.settings.stages import RelaySettings, StageSettings
from infra.settings.vectorstore import QdrantSettings

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "admin", "password"})


def is_placeholder(secret: str) -> bool:
    """Whether `secret` is a placeholder: a well-known one, or a fill-in such as the deployment
    bundles' `<a long random token>`."""
    value = secret.strip().lower()
    return value in PLACEHOLDER_SECRETS or (value.startswith("<") and value.endswith(">"))


class Settings(BaseSettings):
    """Every setting of every Ragline process."""

    model_config = SettingsConfigDict(
        env_prefix="RAGLINE_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    local_mode: bool = Field(
        default=True,
        description=(
            "Run on the stand-in servers and accept generated secrets; `false` refuses "
            "placeholder secrets and needs a Qdrant URL."
        ),
    )
    run_dir: Path = Field(
        default=Path(".ragline"),
        description=(
            "Directory of the process's local data: the embedded vector store and the ONNX exports."
        ),
    )
    admin_token: SecretStr = Field(
        default=SecretStr(""),
        description="Bearer token of the bootstrap admin of `bootstrap_tenant`.",
    )
    internal_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Secret the internal search caller sends in `X-Internal-Secret`.",
    )
    internal_secret_previous: SecretStr = Field(
        default=SecretStr(""),
        description=(
            "While the internal secret is rotated, the old one, still accepted (empty: none)."
        ),
    )
    bootstrap_tenant: str = Field(
        default="default", description="Tenant that `admin_token` is the admin of."
    )
    log_level: str = Field(
        default="INFO", description="Logging level of the process (DEBUG, INFO, WARNING...)."
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        description="Address of a worker's or the store process's Prometheus endpoint.",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of a worker's or the store process's Prometheus endpoint (0: none).",
    )
    release_free_memory_every_s: float = Field(
        default=10.0,
        ge=0,
        description=(
            "How often the process gives the memory malloc keeps free back to the system "
            "(`malloc_trim`; 0: never). Kept, it made the processes' private memory grow."
        ),
    )
    memory_trace_frames: int = Field(
        default=0,
        ge=0,
        le=100,
        description=(
            "Trace the process's Python allocations with this many frames each and write a "
            "snapshot to `memory` under `run_dir` on SIGUSR2 (0: off; for diagnosis, it costs "
            "memory and CPU)."
        ),
    )

    kafka: KafkaSettings = Field(
        default=KafkaSettings(), description="Kafka connection and consumer tuning."
    )
    mongo: MongoSettings = Field(default=MongoSettings(), description="MongoDB connection.")
    qdrant: QdrantSettings = Field(
        default=QdrantSettings(),
        description="Vector store: a Qdrant server or the embedded engine.",
    )
    redis: RedisSettings = Field(
        default=RedisSettings(), description="Redis connection used by the search caches."
    )
    embedding: EmbeddingSettings = Field(
        default=EmbeddingSettings(), description="The embedding model."
    )
    chunking: ChunkingSettings = Field(
        default=ChunkingSettings(), description="How text is cut into chunks."
    )
    contextual: ContextualSettings = Field(
        default=ContextualSettings(), description="The context prefix each chunk is embedded with."
    )
    ingest: IngestSettings = Field(
        default=IngestSettings(), description="Upload limits and the pipeline's failure policy."
    )
    stages: StageSettings = Field(default=StageSettings(), description="Each stage's policy.")
    search: SearchSettings = Field(
        default=SearchSettings(), description="The search service: caches and candidate pools."
    )
    relay: RelaySettings = Field(default=RelaySettings(), description="The relay process.")
    generations: GenerationSettings = Field(
        default=GenerationSettings(),
        description="The vector store's generations: one per embedding model.",
    )
    crawl: CrawlSettings = Field(default=CrawlSettings(), description="The crawl worker.")
    limits: LimitsSettings = Field(default=LimitsSettings(), description="Request limits.")
    api: ApiSettings = Field(default=ApiSettings(), description="The HTTP server.")

    @model_validator(mode="after")
    def _inline_parts_fit_in_a_message(self) -> Settings:
        # An event's own fields take a few hundred bytes beside the part it carries.
        inline, largest = self.ingest.extract_inline_max_bytes, self.kafka.max_message_bytes
        if inline > largest - 16 * 1024:
            raise ValueError(
                f"RAGLINE_INGEST__EXTRACT_INLINE_MAX_BYTES ({inline}) must leave 16 KiB of a "
                f"Kafka message (kafka.max_message_bytes {largest}) for the event's other fields"
            )
        return self

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> Settings:
        if self.local_mode:
            return self
        for name in ("admin_token", "internal_secret"):
            value: SecretStr = getattr(self, name)
            if is_placeholder(value.get_secret_value()):
                raise ValueError(f"RAGLINE_{name.upper()} must be set to a real secret")
        previous = self.internal_secret_previous.get_secret_value()
        if previous and is_placeholder(previous):
            raise ValueError("RAGLINE_INTERNAL_SECRET_PREVIOUS must be a real secret or empty")
        if self.qdrant.url is None:
            raise ValueError("RAGLINE_QDRANT__URL must point at a Qdrant server outside local mode")
        return self

    @property
    def embedded_vector_store(self) -> bool:
        """True when the vector store is the in-process engine (no Qdrant URL)."""
        return self.qdrant.url is None

    @property
    def vector_store_path(self) -> Path:
        """Directory of the embedded vector store."""
        return self.qdrant.path or self.run_dir / "vectors"

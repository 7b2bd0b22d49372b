"""All of Ragline's settings, in one place.

Every process builds one `Settings` in its entry point and passes it down. Values come from
environment variables prefixed `RAGLINE_`, nested with `__`
(e.g. `RAGLINE_KAFKA__BOOTSTRAP_SERVERS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "admin", "password"})


class KafkaSettings(BaseModel):
    """Kafka connection and consumer tuning."""

    bootstrap_servers: str = "127.0.0.1:9092"
    partitions: int = Field(default=6, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    create_topics: bool = True
    # Real Kafka's minimum session timeout is 6000 ms; the local broker accepts lower values,
    # which make group joins (about session_timeout_ms / 2) fast in tests.
    session_timeout_ms: int = Field(default=10_000, ge=500)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    # Produce-to-consume latency is about half of this on the local broker.
    fetch_max_wait_ms: int = Field(default=100, ge=0)
    max_message_bytes: int = Field(default=2 * 1024 * 1024, ge=64 * 1024)
    group_prefix: str = "ragline"
    # How long an accepted change waits for Kafka to acknowledge its events before leaving
    # them to the relay (the request answers either way).
    send_timeout_s: float = Field(default=3.0, gt=0)


class MongoSettings(BaseModel):
    """MongoDB connection."""

    url: str = "mongodb://127.0.0.1:27017/?directConnection=true"
    database: str = "ragline"
    timeout_ms: int = Field(default=5_000, ge=100)


class QdrantSettings(BaseModel):
    """Vector store: a Qdrant server when `url` is set, else the embedded engine at `path`."""

    url: str | None = None
    api_key: SecretStr | None = None
    path: Path | None = None
    collection: str = "ragline_chunks"
    timeout_s: float = Field(default=10.0, gt=0)
    # The embedded engine builds its HNSW index (and drops deleted points) when the store has
    # been idle this long, and under writes that never pause, at least this often.
    optimize_idle_s: float = Field(default=5.0, gt=0)
    optimize_every_s: float = Field(default=120.0, gt=0)
    # HNSW beam width of dense queries. A permission filter that leaves a tenth of the chunks
    # readable loses recall at the engine's default (0.995 recall@10 at 100,000 chunks);
    # 256 restores 1.000 at no measurable latency (benchmarks/search.py --user-form).
    search_ef: int = Field(default=256, ge=16, le=4096)
    # Dense vectors: "int8" keeps scalar-quantised copies in RAM (a quarter of the floats) and
    # the float originals on disk, read to rescore each query's candidates; "none" keeps the
    # floats in RAM. A store made with the other setting is converted in place by its next
    # optimisation (the server's own optimiser; the embedded engine's idle one): nothing is
    # re-embedded.
    quantization: Literal["int8", "none"] = "int8"
    # A quantised dense query takes this many times its limit in candidates and rescores them
    # with the original vectors.
    oversampling: float = Field(default=2.0, ge=1.0, le=16.0)
    # Searches ranking at the same moment go to the store as one batch (one pass over the
    # segments): at most this many searches a batch. A lone search goes out at once; a batch
    # forms from the searches that queued while the previous one ran.
    rank_batch_max: int = Field(default=32, ge=1, le=256)
    # How long the first search of a burst waits for others to join its batch (0: not at all).
    rank_batch_wait_ms: float = Field(default=0.0, ge=0, le=2.0)
    # Ranking batches a Qdrant server is sent at once (it answers several in parallel); the
    # embedded engine runs one call at a time, so it sends one.
    rank_batches_in_flight: int = Field(default=2, ge=1, le=32)


class RedisSettings(BaseModel):
    """Redis connection used by the search caches."""

    url: str = "redis://127.0.0.1:6379/0"
    # Short: a cache that does not answer at once is skipped, not waited for.
    timeout_s: float = Field(default=0.2, gt=0)


class EmbeddingSettings(BaseModel):
    """Which embedding model turns text into dense vectors."""

    provider: Literal["local", "gemini"] = "local"
    # For the local provider, a sentence-transformers model path; empty means the packaged
    # all-MiniLM-L6-v2.
    model: str = ""
    dimensions: int = Field(default=384, ge=8)
    batch_size: int = Field(default=32, ge=1, le=256)
    # Copies of the local model, each single-threaded, that share every batch; 0 means one
    # per CPU this process may use. The API process needs only one (queries are single texts).
    parallelism: int = Field(default=0, ge=0, le=32)
    # torch threads per copy; 0 means 1 with several copies, torch's default with one.
    torch_threads: int = Field(default=0, ge=0)
    # Batches an embed worker works on at once: while one waits on Kafka or Mongo, the other
    # keeps the model busy.
    concurrency: int = Field(default=2, ge=1, le=16)
    # What runs the local model for search queries: `onnx` (onnxruntime, single-threaded: about
    # 3x faster than torch for one short query, and a process that only searches never loads
    # torch) or `torch`. Documents are always embedded with torch, which is faster for batches.
    query_runtime: Literal["onnx", "torch"] = "onnx"
    # Where the ONNX export of the local model is cached (keyed by a hash of its weights and
    # tokenizer); unset means `onnx` under the data directory (`run_dir`).
    onnx_dir: Path | None = None
    # Threads a burst of search queries is shared out to, each running a part on the one
    # onnxruntime session (one core each); 0 means one per CPU this process may use. One by
    # default: on two cores the API's other core is busy with the store and the requests.
    query_threads: int = Field(default=1, ge=0, le=32)
    gemini_model: str = "gemini-embedding-001"
    gemini_api_key: SecretStr | None = None
    # Only for pointing the client at a compatible endpoint (tests, proxies).
    gemini_base_url: str | None = None

    def onnx_path(self, run_dir: Path) -> Path:
        """The directory of the cached ONNX exports, for a process whose data is in `run_dir`."""
        return self.onnx_dir or run_dir / "onnx"


class ChunkingSettings(BaseModel):
    """Sliding-window chunking (seed 000's algorithm)."""

    chunk_size_chars: int = Field(default=1200, ge=100)
    chunk_overlap_chars: int = Field(default=180, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.chunk_overlap_chars >= self.chunk_size_chars:
            raise ValueError("chunk_overlap_chars must be smaller than chunk_size_chars")
        return self


class ContextualSettings(BaseModel):
    """The context prefix each chunk is embedded with: generic, or written by an LLM."""

    # `none`: the generic prefix (document title, heading path, page), no model. `openai`: any
    # OpenAI-compatible chat endpoint; `gemini`: google-genai. Either falls back to the generic
    # prefix for a chunk whose call fails or times out.
    provider: Literal["none", "openai", "gemini"] = "none"
    model: str = ""
    # OpenAI-compatible: the API root that `/chat/completions` is under (unset: OpenAI's).
    # Gemini: only for pointing the client at a compatible endpoint (tests, proxies).
    base_url: str | None = None
    api_key: SecretStr | None = None
    # One call's limit; past it the chunk gets the generic prefix.
    timeout_s: float = Field(default=10.0, gt=0)
    # Calls in flight at once for one message of the chunk stage.
    concurrency: int = Field(default=4, ge=1, le=64)
    max_tokens: int = Field(default=100, ge=8, le=2000)
    # Characters of the text before and after the chunk the model is shown, each side.
    around_chars: int = Field(default=1000, ge=0, le=20_000)
    # The model's answer is cut to this many characters (at a word), so that the prefix
    # leaves most of the embedding model's window to the chunk itself.
    max_answer_chars: int = Field(default=240, ge=40, le=2000)

    @model_validator(mode="after")
    def _provider_needs_a_model(self) -> ContextualSettings:
        if self.provider != "none" and not self.model.strip():
            raise ValueError(f"contextual.model must be set for the {self.provider} provider")
        if self.provider == "gemini" and (
            self.api_key is None or not self.api_key.get_secret_value()
        ):
            raise ValueError("contextual.api_key must be set for the gemini provider")
        return self


class IngestSettings(BaseModel):
    """Upload limits and the pipeline's failure policy."""

    max_upload_mb: int = Field(default=20, ge=1)
    retry_backoff_s: float = Field(default=0.5, ge=0)
    retry_backoff_max_s: float = Field(default=10.0, ge=0)
    parse_error_max_chars: int = Field(default=500, ge=50)
    # A document in progress that has not moved for this long is reported as stalled.
    stall_after_s: float = Field(default=600.0, gt=0)
    # PDF pages without a text layer are read with OCR, up to this many pages a document.
    ocr_enabled: bool = True
    ocr_max_pages: int = Field(default=100, ge=0)
    # Extracted text is handed to the chunk stage in parts of about this many characters
    # (about one embedding batch), so embedding starts while a long file is still extracted.
    extract_part_chars: int = Field(default=32_000, ge=1_000)
    # What one file may make the extract stage do; each limit fails the document with a reason.
    # Files are read in a parser process whose address space is capped at this many MB.
    parser_memory_mb: int = Field(default=2048, ge=512)
    # Text a document may hold (20 million characters: about 10,000 pages).
    max_document_chars: int = Field(default=20_000_000, ge=1_000)
    # Attachments an e-mail may carry.
    max_attachments: int = Field(default=100, ge=0)
    # What a packaged file (DOCX) may unpack to.
    max_unpacked_mb: int = Field(default=256, ge=1)

    @property
    def max_upload_bytes(self) -> int:
        """The upload limit in bytes."""
        return self.max_upload_mb * 1024 * 1024


class StagePolicy(BaseModel):
    """How a stage treats one message: tries of a retryable error, and the time one try may
    take before the document fails (so a pathological file cannot hold a partition)."""

    max_attempts: int = Field(default=3, ge=1, le=20)
    time_limit_s: float = Field(default=300.0, gt=0)


class StageSettings(BaseModel):
    """Each stage's policy (`RAGLINE_STAGES__EXTRACT__TIME_LIMIT_S=...`)."""

    records: StagePolicy = StagePolicy(max_attempts=3, time_limit_s=60)
    # One URL: robots, the fetch (within crawl.fetch_timeout_s) and handing it to ingestion.
    crawl: StagePolicy = StagePolicy(max_attempts=3, time_limit_s=120)
    # Parsing and OCR of a long file is the slowest work of the pipeline.
    extract: StagePolicy = StagePolicy(max_attempts=3, time_limit_s=600)
    # A batch may wait on a language model for its chunk contexts.
    chunk: StagePolicy = StagePolicy(max_attempts=3, time_limit_s=300)
    embed: StagePolicy = StagePolicy(max_attempts=3, time_limit_s=300)
    # Writes to the vector store and MongoDB only: a slow try means a service is struggling.
    index: StagePolicy = StagePolicy(max_attempts=5, time_limit_s=120)

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


class CrawlSettings(BaseModel):
    """The crawl worker (`python -m workers.crawl`)."""

    user_agent: str = "RaglineCrawler/1.0"
    # Pages and depth of a job when its request does not say.
    max_pages: int = Field(default=200, ge=1, le=100_000)
    max_depth: int = Field(default=3, ge=0, le=20)
    # Politeness: the time between two requests to one host from one worker.
    per_host_delay_s: float = Field(default=0.5, ge=0)
    # One response: its whole time, its size, and the redirects followed.
    fetch_timeout_s: float = Field(default=10.0, gt=0)
    max_page_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    max_redirects: int = Field(default=5, ge=0, le=20)
    # Loopback, private, link-local (cloud metadata) and other special addresses are refused
    # unless this is set (tests crawl a site on 127.0.0.1).
    allow_private_networks: bool = False


class LimitsSettings(BaseModel):
    """Request limits. Rates are counted in Redis per window, across API processes."""

    # Documents a tenant may add per minute (uploads, texts, batch records).
    uploads_per_minute: int = Field(default=600, ge=1)
    # Searches per second of one bot, one person, or one tenant's internal form; over it a
    # search is answered from the cache if it can be, else refused (429).
    searches_per_second: int = Field(default=200, ge=1)


class RelaySettings(BaseModel):
    """The relay process (`python -m workers.relay`): sends the outbox's events to Kafka and
    re-drives documents that stopped moving."""

    # How often the outbox is read, and how old an entry must be before the relay sends it
    # (younger ones are being sent by the process that wrote them).
    poll_s: float = Field(default=0.5, gt=0)
    send_after_s: float = Field(default=2.0, ge=0)
    batch: int = Field(default=200, ge=1, le=5_000)
    # How often the broker and the documents in progress are checked.
    reconcile_every_s: float = Field(default=5.0, gt=0)
    # A stuck document is started again at most this many times, then fails with a reason.
    max_redrives: int = Field(default=3, ge=0, le=20)


class SearchSettings(BaseModel):
    """The search service: caches and candidate pools."""

    # Seed 000's layered caches: resolved bot access, query embeddings, and whole answers
    # (longer when they found something).
    access_ttl_s: int = Field(default=60, ge=1)
    embedding_ttl_s: int = Field(default=24 * 3600, ge=1)
    result_ttl_s: int = Field(default=30 * 60, ge=1)
    empty_result_ttl_s: int = Field(default=2 * 60, ge=1)
    # After a Redis failure, searches skip the cache for this long instead of waiting on it.
    cache_retry_after_s: float = Field(default=2.0, ge=0)
    # Candidates each retriever contributes to a hybrid fusion, and chunks fetched per hit
    # wanted (merging neighbours, folding copies and the threshold thin them out).
    depth: int = Field(default=100, ge=1, le=1000)
    oversample: int = Field(default=5, ge=1, le=20)
    # A retriever's first chunk leads clearly, and is placed first by hybrid fusion, when its
    # BM25 score is this many times the second's, or its cosine this much above the second's.
    lead_ratio: float = Field(default=1.5, ge=1)
    lead_gap: float = Field(default=0.1, gt=0)
    # Hybrid convex fusion's dense weight where a search sets none, by the kind of query
    # (`services.search.fusion.query_kind`): a question (how..., what...?), a query naming an
    # identifier or quoting words, anything else (keywords, a title, a description).
    question_dense_weight: float = Field(default=0.8, ge=0, le=1)
    exact_dense_weight: float = Field(default=0.5, ge=0, le=1)
    plain_dense_weight: float = Field(default=0.5, ge=0, le=1)
    # Pseudo-relevance feedback in hybrid searches for a question: terms held by at
    # least `feedback_min_chunks` of the `feedback_chunks` best semantic matches join the
    # keyword query at `feedback_weight` (0 chunks: off; `services.search.retrieval.Feedback`).
    feedback_chunks: int = Field(default=0, ge=0, le=20)
    feedback_min_chunks: int = Field(default=2, ge=1, le=20)
    feedback_weight: float = Field(default=0.3, ge=0, le=10)
    # A query's identifier term is rare when chunks of at most this many documents in the
    # searched KBs hold it; chunks holding every rare one are placed first by hybrid fusion.
    rare_term_documents: int = Field(default=3, ge=0, le=100)
    # Hits sharing at least this share of their word shingles (of the shorter one) are copies
    # of one passage: they fold into the best-ranked one (`services.search.duplicates`).
    duplicate_threshold: float = Field(default=0.5, gt=0, le=1)
    # Neighbouring chunks of a document merge into one hit of at most this many chunks.
    merge_max_chunks: int = Field(default=3, ge=1, le=20)
    # People's searches (`POST /api/v1/knowledge/search`): the minimum cosine similarity of a
    # hit when the request does not say (hybrid keeps exact keyword matches below it).
    people_score_threshold: float = Field(default=0.3, ge=0, le=1)


class ApiSettings(BaseModel):
    """The HTTP server."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # Host headers the MCP endpoint answers (its DNS-rebinding protection); "*" turns the
    # check off (behind a proxy that checks them).
    mcp_allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    )
    # A request body that is not a file upload (JSON, forms) is refused (413) above this size;
    # uploads have ingest.max_upload_mb.
    max_body_mb: int = Field(default=50, ge=1)


class Settings(BaseSettings):
    """Every setting of every Ragline process."""

    model_config = SettingsConfigDict(
        env_prefix="RAGLINE_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    # Local mode runs on the stand-in servers and accepts generated secrets.
    local_mode: bool = True
    run_dir: Path = Path(".ragline")
    admin_token: SecretStr = SecretStr("")
    internal_secret: SecretStr = SecretStr("")
    # While the internal secret is rotated, the old one is accepted too (empty: none).
    internal_secret_previous: SecretStr = SecretStr("")
    bootstrap_tenant: str = "default"
    log_level: str = "INFO"
    # Prometheus endpoint of a worker process; port 0 disables it.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=0, le=65535)

    kafka: KafkaSettings = KafkaSettings()
    mongo: MongoSettings = MongoSettings()
    qdrant: QdrantSettings = QdrantSettings()
    redis: RedisSettings = RedisSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    contextual: ContextualSettings = ContextualSettings()
    ingest: IngestSettings = IngestSettings()
    stages: StageSettings = StageSettings()
    search: SearchSettings = SearchSettings()
    relay: RelaySettings = RelaySettings()
    crawl: CrawlSettings = CrawlSettings()
    limits: LimitsSettings = LimitsSettings()
    api: ApiSettings = ApiSettings()

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> Settings:
        if self.local_mode:
            return self
        for name in ("admin_token", "internal_secret"):
            value: SecretStr = getattr(self, name)
            if value.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                raise ValueError(f"RAGLINE_{name.upper()} must be set to a real secret")
        previous = self.internal_secret_previous.get_secret_value()
        if previous and previous.strip().lower() in PLACEHOLDER_SECRETS:
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

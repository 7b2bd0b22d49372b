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


class MongoSettings(BaseModel):
    """MongoDB connection."""

    url: str = Field(
        default="mongodb://127.0.0.1:27017/?directConnection=true",
        description="MongoDB connection string.",
    )
    database: str = Field(default="ragline", description="Name of the MongoDB database.")
    timeout_ms: int = Field(
        default=5_000,
        ge=100,
        description="Server selection and connection timeout (ms).",
    )


class QdrantSettings(BaseModel):
    """Vector store: a Qdrant server when `url` is set, else the embedded engine at `path`."""

    url: str | None = Field(
        default=None,
        description="URL of a Qdrant server; unset means the embedded engine.",
    )
    api_key: SecretStr | None = Field(default=None, description="API key of the Qdrant server.")
    path: Path | None = Field(
        default=None,
        description="Directory of the embedded engine; unset means `vectors` under `run_dir`.",
    )
    store_socket: Path | None = Field(
        default=None,
        description=(
            "Unix socket of a process serving the embedded engine (`python -m ragline.store`), "
            "which every other process reaches it through; unset means the process that opens "
            "it holds it."
        ),
    )
    collection: str = Field(
        default="ragline_chunks", description="Name of the collection holding the chunks."
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="Timeout of a request to the Qdrant server (s)."
    )
    optimize_idle_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "Idle time after which the embedded engine builds its HNSW index and drops "
            "deleted points (s)."
        ),
    )
    optimize_every_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Longest time between two optimisations of the embedded engine under writes that "
            "never pause (s)."
        ),
    )
    # A permission filter that leaves a tenth of the chunks readable loses recall at the
    # engine's default (0.995 recall@10 at 100,000 chunks); 256 restores 1.000 at no
    # measurable latency (benchmarks/search.py --user-form).
    search_ef: int = Field(
        default=256,
        ge=16,
        le=4096,
        description="HNSW beam width of dense queries (count of candidates).",
    )
    # A store made with the other setting is converted in place by its next optimisation (the
    # server's own optimiser; the embedded engine's idle one): nothing is re-embedded.
    quantization: Literal["auto", "int8", "none"] = Field(
        default="auto",
        description=(
            "Dense vectors: `int8` keeps scalar-quantised copies in RAM (a quarter of the "
            "floats) and the floats on disk for rescoring; `none` keeps the floats in RAM; "
            "`auto` is `none` for an embedded store of at most `in_ram_max_points` points and "
            "`int8` for a larger one (or a Qdrant server's collection)."
        ),
    )
    # What a search reads stays in RAM up to this size (benchmarks/search.py measures both
    # sides of it; docs/production.md's sizing table has the RAM each size needs).
    in_ram_max_points: int = Field(
        default=200_000,
        ge=0,
        description=(
            "An embedded store of at most this many points when it is opened keeps its vectors, "
            "payloads and sparse index in RAM; a larger one keeps them on disk and reads what "
            "a search needs (count)."
        ),
    )
    oversampling: float = Field(
        default=2.0,
        ge=1.0,
        le=16.0,
        description=(
            "Candidates a quantised dense query takes, as a multiple of its limit, to rescore "
            "with the original vectors (factor)."
        ),
    )
    # The engine's binding holds the GIL for much of a call: more threads than cores only
    # queue for it (measured: 4 and 8 answered fewer searches at 32 at once than 2).
    store_threads: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Threads the embedded engine's calls run on, at once (count).",
    )
    # A lone search goes out at once; a batch forms from the searches that queued while the
    # previous one ran, and is one pass over the segments. The embedded engine answers a batch
    # on one thread, one query after another: at 32 searches at once, batches of 8 on two
    # threads answered more of them than batches of 32 (benchmarks/search.py).
    rank_batch_max: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Most searches ranked together in one batch call to the store (count).",
    )
    rank_batch_wait_ms: float = Field(
        default=0.0,
        ge=0,
        le=2.0,
        description=(
            "How long the first search of a burst waits for others to join its batch (ms; 0: "
            "not at all)."
        ),
    )
    # The embedded engine runs one call at a time, so it sends one.
    rank_batches_in_flight: int = Field(
        default=2,
        ge=1,
        le=32,
        description=(
            "Ranking batches sent to a Qdrant server at once, which answers several in "
            "parallel (count)."
        ),
    )


class RedisSettings(BaseModel):
    """Redis connection used by the search caches."""

    url: str = Field(
        default="redis://127.0.0.1:6379/0", description="Redis URL of the search caches."
    )
    # Short: a cache that does not answer at once is skipped, not waited for.
    timeout_s: float = Field(
        default=0.2, gt=0, description="Connect and socket timeout of Redis calls (s)."
    )


class EmbeddingSettings(BaseModel):
    """Which embedding model turns text into dense vectors."""

    provider: Literal["local", "gemini", "hashed"] = Field(
        default="local",
        description=(
            "Embedding model: `local` (sentence-transformers on the CPU), `gemini`, or `hashed` "
            "(hashed word and character-trigram features with no model file: fast and "
            "deterministic, but blind to meaning; for tests and tiny demos, never production)."
        ),
    )
    model: str = Field(
        default="",
        description=(
            "Path of the local provider's sentence-transformers model; empty means the "
            "packaged all-MiniLM-L6-v2."
        ),
    )
    dimensions: int = Field(
        default=384,
        ge=8,
        description=(
            "Length of each vector (count); must match the local model, and is the size asked "
            "of Gemini."
        ),
    )
    batch_size: int = Field(
        default=32,
        ge=1,
        le=256,
        description="Chunks per Kafka batch and per model call (count).",
    )
    # The API process needs only one copy (queries are single texts).
    parallelism: int = Field(
        default=0,
        ge=0,
        le=32,
        description=(
            "Single-threaded copies of the local model that share every batch (count; 0: one "
            "per CPU this process may use)."
        ),
    )
    torch_threads: int = Field(
        default=0,
        ge=0,
        description=(
            "torch threads per model copy (count; 0: 1 with several copies, torch's default "
            "with one)."
        ),
    )
    # While one batch waits on Kafka or Mongo, the other keeps the model busy.
    concurrency: int = Field(
        default=2,
        ge=1,
        le=16,
        description="Batches an embed worker works on at once (count).",
    )
    # onnxruntime, single-threaded, is about 3x faster than torch for one short query, and a
    # process that only searches never loads torch. Documents are always embedded with torch,
    # which is faster for batches.
    query_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="What runs the local model for search queries: `onnx` or `torch`.",
    )
    onnx_dir: Path | None = Field(
        default=None,
        description=(
            "Cache directory of the local model's ONNX export, keyed by a hash of its weights "
            "and tokenizer; unset means `onnx` under `run_dir`."
        ),
    )
    # One by default: on two cores the API's other core is busy with the store and the requests.
    query_threads: int = Field(
        default=1,
        ge=0,
        le=32,
        description=(
            "Threads a burst of search queries is shared out to, each running a part on the "
            "one onnxruntime session (count; 0: one per CPU this process may use)."
        ),
    )
    gemini_model: str = Field(
        default="gemini-embedding-001", description="Model of the `gemini` provider."
    )
    gemini_api_key: SecretStr | None = Field(
        default=None, description="API key of the `gemini` provider (required with it)."
    )
    gemini_base_url: str | None = Field(
        default=None,
        description=(
            "Endpoint of the `gemini` provider, only to point it at a compatible one (tests, "
            "proxies)."
        ),
    )

    def onnx_path(self, run_dir: Path) -> Path:
        """The directory of the cached ONNX exports, for a process whose data is in `run_dir`."""
        return self.onnx_dir or run_dir / "onnx"


class ChunkingSettings(BaseModel):
    """Sliding-window chunking: fixed-size character windows that overlap."""

    chunk_size_chars: int = Field(
        default=1200, ge=100, description="Length of a chunk's window (characters)."
    )
    chunk_overlap_chars: int = Field(
        default=180,
        ge=0,
        description=(
            "Characters consecutive chunks share; must be smaller than `chunk_size_chars`."
        ),
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.chunk_overlap_chars >= self.chunk_size_chars:
            raise ValueError("chunk_overlap_chars must be smaller than chunk_size_chars")
        return self


class ContextualSettings(BaseModel):
    """The context prefix each chunk is embedded with: generic, or written by an LLM."""

    # Either model provider falls back to the generic prefix for a chunk whose call fails or
    # times out.
    provider: Literal["none", "openai", "gemini"] = Field(
        default="none",
        description=(
            "Who writes chunk contexts: `none` (the generic prefix of title, heading path and "
            "page), `openai` (any OpenAI-compatible chat endpoint) or `gemini`."
        ),
    )
    model: str = Field(
        default="", description="Chat model of the provider (required with a provider)."
    )
    base_url: str | None = Field(
        default=None,
        description=(
            "`openai`: the API root `/chat/completions` is under (unset: OpenAI's); `gemini`: "
            "only to point the client at a compatible endpoint (tests, proxies)."
        ),
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key of the provider (required for `gemini`)."
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Limit of one call (s); past it the chunk gets the generic prefix.",
    )
    concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Calls in flight at once for one message of the chunk stage (count).",
    )
    max_tokens: int = Field(
        default=100,
        ge=8,
        le=2000,
        description=(
            "Token limit of the model's answer (tokens); a thinking model spends it on "
            "thinking too."
        ),
    )
    around_chars: int = Field(
        default=1000,
        ge=0,
        le=20_000,
        description="Text before and after the chunk the model is shown, each side (characters).",
    )
    # So that the prefix leaves most of the embedding model's window to the chunk itself.
    max_answer_chars: int = Field(
        default=240,
        ge=40,
        le=2000,
        description="Length the model's answer is cut to, at a word (characters).",
    )

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

    max_upload_mb: int = Field(default=20, ge=1, description="Largest file upload (MB).")
    retry_backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="Wait before a stage's second try, doubled for each further one (s).",
    )
    retry_backoff_max_s: float = Field(
        default=10.0, ge=0, description="Longest wait between two tries of a stage (s)."
    )
    parse_error_max_chars: int = Field(
        default=500,
        ge=50,
        description="Length a failed document's reason is cut to (characters).",
    )
    stall_after_s: float = Field(
        default=600.0,
        gt=0,
        description="Time after which a document in progress that has not moved is stalled (s).",
    )
    ocr_enabled: bool = Field(
        default=True, description="Read PDF pages without a text layer with OCR."
    )
    ocr_max_pages: int = Field(
        default=100, ge=0, description="Most pages of a document read with OCR (count)."
    )
    # About one embedding batch, so embedding starts while a long file is still extracted.
    extract_part_chars: int = Field(
        default=32_000,
        ge=1_000,
        description=(
            "Approximate size of the parts of extracted text handed to the chunk stage "
            "(characters)."
        ),
    )
    # What one file may make the extract stage do; each limit fails the document with a reason.
    parser_memory_mb: int = Field(
        default=2048,
        ge=512,
        description="Address-space cap of the parser process that reads a file (MB).",
    )
    max_document_chars: int = Field(
        default=20_000_000,
        ge=1_000,
        description=("Text a document may hold (characters; 20 million is about 10,000 pages)."),
    )
    max_attachments: int = Field(
        default=100, ge=0, description="Attachments an e-mail may carry (count)."
    )
    max_unpacked_mb: int = Field(
        default=256, ge=1, description="Size a packaged file (DOCX) may unpack to (MB)."
    )

    @property
    def max_upload_bytes(self) -> int:
        """The upload limit in bytes."""
        return self.max_upload_mb * 1024 * 1024


class StagePolicy(BaseModel):
    """How a stage treats one message: tries of a retryable error, and the time one try may
    take before the document fails (so a pathological file cannot hold a partition)."""

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


class StageSettings(BaseModel):
    """Each stage's policy (`RAGLINE_STAGES__EXTRACT__TIME_LIMIT_S=...`)."""

    records: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=60),
        description=(
            "Records stage: one connector record from `records.ingest.v1`, upserted as a document."
        ),
    )
    crawl: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=120),
        description=(
            "Crawl stage: one URL, its robots check, the fetch (within crawl.fetch_timeout_s) "
            "and its hand-off to ingestion."
        ),
    )
    extract: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=600),
        description="Extract stage: parsing and OCR of a file, the slowest work of the pipeline.",
    )
    chunk: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=300),
        description="Chunk stage: a batch may wait on a language model for its chunk contexts.",
    )
    embed: StagePolicy = Field(
        default=StagePolicy(max_attempts=3, time_limit_s=300),
        description="Embed stage: one batch of chunks turned into vectors.",
    )
    index: StagePolicy = Field(
        default=StagePolicy(max_attempts=5, time_limit_s=120),
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


class CrawlSettings(BaseModel):
    """The crawl worker (`python -m workers crawl`)."""

    user_agent: str = Field(
        default="RaglineCrawler/1.0",
        description="User-Agent header of the crawler, and the agent robots.txt rules apply to.",
    )
    max_pages: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Pages of a crawl job when its request does not say (count).",
    )
    max_depth: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Link depth of a crawl job when its request does not say (count).",
    )
    per_host_delay_s: float = Field(
        default=0.5,
        ge=0,
        description="Politeness: time between two requests to one host from one worker (s).",
    )
    fetch_timeout_s: float = Field(
        default=10.0, gt=0, description="Whole time one response may take (s)."
    )
    max_page_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        description="Largest response body; a larger one is refused (bytes).",
    )
    max_redirects: int = Field(
        default=5, ge=0, le=20, description="Redirects followed for one URL (count)."
    )
    # Tests crawl a site on 127.0.0.1.
    allow_private_networks: bool = Field(
        default=False,
        description=(
            "Crawl loopback, private, link-local (cloud metadata) and other special addresses, "
            "which are refused otherwise."
        ),
    )


class LimitsSettings(BaseModel):
    """Request limits. Rates are counted in Redis per window, across API processes."""

    uploads_per_minute: int = Field(
        default=600,
        ge=1,
        description="Documents a tenant may add per minute: uploads, texts, batch records (count).",
    )
    searches_per_second: int = Field(
        default=200,
        ge=1,
        description=(
            "Searches per second of one bot, one person, or one tenant's internal form (count); "
            "over it a search is answered from the cache if it can be, else refused (429)."
        ),
    )


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


class SearchSettings(BaseModel):
    """The search service: caches and candidate pools."""

    access_ttl_s: int = Field(
        default=60,
        ge=1,
        description=(
            "Longest an API process holds a bot's resolved access, a tenant's KBs, a token or a "
            "reader in memory; a change retires them at once (s)."
        ),
    )
    embedding_ttl_s: int = Field(
        default=24 * 3600, ge=1, description="Lifetime of a cached query embedding (s)."
    )
    result_ttl_s: int = Field(
        default=30 * 60, ge=1, description="Lifetime of a cached answer that found hits (s)."
    )
    empty_result_ttl_s: int = Field(
        default=2 * 60, ge=1, description="Lifetime of a cached answer that found nothing (s)."
    )
    cache_retry_after_s: float = Field(
        default=2.0,
        ge=0,
        description="After a Redis failure, how long searches skip the cache (s).",
    )
    depth: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="Candidates each retriever contributes to a hybrid fusion (count).",
    )
    # Merging neighbours, folding copies and the threshold thin the chunks out.
    oversample: int = Field(
        default=5,
        ge=1,
        le=20,
        description=(
            "Chunks of the ranking that must pass the threshold among those a search reads "
            "first, per hit wanted (factor)."
        ),
    )
    lead_ratio: float = Field(
        default=1.5,
        ge=1,
        description=(
            "A retriever's first chunk leads, and hybrid fusion places it first, when its BM25 "
            "score is this many times the second's (factor)."
        ),
    )
    lead_gap: float = Field(
        default=0.1,
        gt=0,
        description=(
            "A dense retriever's first chunk leads, and hybrid fusion places it first, when its "
            "cosine is this much above the second's (cosine)."
        ),
    )
    # The kind of a query: `services.search.fusion.query_kind`.
    question_dense_weight: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for a question (how..., what...?) where a search sets "
            "none (0 to 1)."
        ),
    )
    exact_dense_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for a query naming an identifier or quoting words, "
            "where a search sets none (0 to 1)."
        ),
    )
    plain_dense_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for any other query (keywords, a title, a "
            "description), where a search sets none (0 to 1)."
        ),
    )
    # Pseudo-relevance feedback in hybrid searches for a question: terms held by at least
    # `feedback_min_chunks` of the `feedback_chunks` best semantic matches join the keyword
    # query at `feedback_weight` (`services.search.retrieval.Feedback`).
    feedback_chunks: int = Field(
        default=0,
        ge=0,
        le=20,
        description=(
            "Best semantic matches whose terms may join a question's keyword query (count; "
            "0: no feedback)."
        ),
    )
    feedback_min_chunks: int = Field(
        default=2,
        ge=1,
        le=20,
        description="Of those matches, how many must hold a term for it to join (count).",
    )
    feedback_weight: float = Field(
        default=0.3,
        ge=0,
        le=10,
        description="Weight of the feedback terms in the keyword query (factor).",
    )
    rare_term_documents: int = Field(
        default=3,
        ge=0,
        le=100,
        description=(
            "A query's identifier term is rare when at most this many documents of the searched "
            "KBs hold it; chunks holding every rare one go first in hybrid fusion (count)."
        ),
    )
    duplicate_threshold: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "Share of word shingles (of the shorter hit) two hits must share to fold into the "
            "best-ranked one as copies (0 to 1; `services.search.duplicates`)."
        ),
    )
    merge_max_chunks: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Most neighbouring chunks of a document merged into one hit (count).",
    )
    # Hybrid searches keep exact keyword matches below it.
    people_score_threshold: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "Minimum cosine similarity of a hit of a person's search "
            "(`POST /api/v1/knowledge/search`) when the request does not say (0 to 1)."
        ),
    )


class ApiSettings(BaseModel):
    """The HTTP server."""

    host: str = Field(default="127.0.0.1", description="Address the HTTP server listens on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port the HTTP server listens on.")
    mcp_allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"],
        description=(
            "Host headers the MCP endpoint answers (its DNS-rebinding protection); `*` turns "
            "the check off, behind a proxy that checks them."
        ),
    )
    max_body_mb: int = Field(
        default=50,
        ge=1,
        description=(
            "Largest request body that is not a file upload (MB); above it the request is "
            "refused (413). Uploads have ingest.max_upload_mb."
        ),
    )
    request_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "Longest a request may take (s): its MongoDB operations are bounded by what is "
            "left of it, and past it the request is answered 503 with `Retry-After` (a "
            "dependency that hangs gives a fast refusal, not a request that waits)."
        ),
    )
    bulk_request_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "The same bound for requests whose work grows with their input (s): uploads, "
            "record batches and syncs, knowledge bases with their sources, crawl jobs, "
            "evaluations, re-driving every dead letter."
        ),
    )


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
        description="Address of a worker process's Prometheus endpoint.",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of a worker process's Prometheus endpoint (0: no endpoint).",
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
    crawl: CrawlSettings = Field(default=CrawlSettings(), description="The crawl worker.")
    limits: LimitsSettings = Field(default=LimitsSettings(), description="Request limits.")
    api: ApiSettings = Field(default=ApiSettings(), description="The HTTP server.")

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

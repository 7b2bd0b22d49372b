"""Prometheus metrics, defined once for every process."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from infra.process.malloc import malloc_info

STAGE_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
SEARCH_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

STAGE_MESSAGES = Counter(
    "ragline_stage_messages_total",
    "Pipeline messages handled, by stage and outcome (ok, skipped, retried, failed).",
    ["stage", "outcome"],
)
DOCUMENTS_PROCESSED = Counter(
    "ragline_documents_processed_total",
    "Documents a stage finished its work on.",
    ["stage"],
)
DOCUMENTS_FAILED = Counter(
    "ragline_documents_failed_total",
    "Documents a stage marked failed.",
    ["stage"],
)
STAGE_DURATION = Histogram(
    "ragline_stage_duration_seconds",
    "Time a stage spent on one message.",
    ["stage"],
    buckets=STAGE_DURATION_BUCKETS,
)
CHUNKS_EMBEDDED = Counter(
    "ragline_chunks_embedded_total",
    "Chunks turned into vectors by the embedding model.",
)
CHUNKS_INDEXED = Counter(
    "ragline_chunks_indexed_total",
    "Chunks written to the vector store.",
)
CONSUMER_LAG = Gauge(
    "ragline_consumer_lag_messages",
    "Messages behind the partition's high watermark, as last seen by a stage.",
    ["stage", "partition"],
)
CALLERS_LEARNT = Gauge(
    "ragline_callers_learnt",
    "Tokens whose callers this API process read into memory at its start (api.learn_callers).",
)
DOCUMENTS_STALLED = Gauge(
    "ragline_documents_stalled",
    "Documents in progress that have not moved for longer than the stall deadline.",
)
EMBEDDING_CACHE = Counter(
    "ragline_embedding_cache_total",
    "Chunk embeddings looked up in the cache, by result (hit, miss).",
    ["result"],
)
CONTEXT_REQUESTS = Counter(
    "ragline_context_requests_total",
    "Chunk contexts asked of an LLM, by provider and outcome (ok, cached, failed, timeout).",
    ["provider", "outcome"],
)
CONTEXT_TOKENS = Counter(
    "ragline_context_tokens_total",
    "Tokens the context LLM calls used, by provider and kind (prompt, completion).",
    ["provider", "kind"],
)
ASSIGNED_PARTITIONS = Gauge(
    "ragline_assigned_partitions",
    "Partitions of its input topic this process consumes, by stage.",
    ["stage"],
)
CONSUMER_REWINDS = Counter(
    "ragline_consumer_rewinds_total",
    "Partitions read again from their start because the broker began a new life (it lost its "
    "messages in a restart) or the consumer's position was past their end, by stage.",
    ["stage"],
)
CONSUMER_REJOINS = Counter(
    "ragline_consumer_rejoins_total",
    "Consumers that joined their group again as new members because the broker began a new "
    "life and none of the worker's consumers got a partition back, by stage.",
    ["stage"],
)
SEARCH_LATENCY = Histogram(
    "ragline_search_latency_seconds",
    "Time to answer a search request.",
    buckets=SEARCH_BUCKETS,
)
SEARCH_REQUESTS = Counter(
    "ragline_search_requests_total",
    "Search requests, by outcome (hits, empty, error).",
    ["outcome"],
)
SEARCH_CACHE_ERRORS = Counter(
    "ragline_search_cache_errors_total",
    "Search cache operations that failed or were skipped because Redis did not answer.",
    ["operation"],
)
UPLOADS = Counter(
    "ragline_uploads_total",
    "Document uploads, by outcome (accepted, duplicate, rejected).",
    ["outcome"],
)


def serve_metrics(host: str, port: int) -> None:
    """Serves /metrics on `host:port` from a background thread (port 0: do nothing)."""
    if port:
        start_http_server(port, addr=host)


DRAINED_ITEMS = Counter(
    "ragline_drained_items_total",
    "Work queued by requests and done after them (`infra.process.drain`): handled, failed, or "
    "dropped because its queue was full.",
    ["queue", "result"],
)
SEARCH_INVALIDATIONS = Counter(
    "ragline_search_invalidations_total",
    "Changes to what searches may see (KB revisions, bots' access, tenants' KBs) received by "
    "this process, and resets of its cached state (a missed change, a lost subscription).",
    ["kind"],
)
RETRIEVAL_EVENTS = Counter(
    "ragline_retrieval_events_total",
    "rag_chunks_retrieved events: sent, or failed (Kafka unavailable; the search answered).",
    ["result"],
)
OUTBOX_DEFERRED = Counter(
    "ragline_outbox_deferred_total",
    "Pipeline events not sent when their change was accepted (Kafka unavailable); the relay "
    "sends them.",
)
MONGO_ABANDONED_TRANSACTIONS = Counter(
    "ragline_mongo_abandoned_transactions_total",
    "Transactions a timeout, lost connection or cancellation may have left open on MongoDB "
    "(holding their documents): ended by killing their session once it answered, or given "
    "up (the server's own limit ends them).",
    ["outcome"],
)
OUTBOX_RELAYED = Counter(
    "ragline_outbox_relayed_total",
    "Pipeline events the relay sent from the outbox.",
)
OUTBOX_PENDING = Gauge(
    "ragline_outbox_pending",
    "Pipeline events waiting in the outbox, as last seen by the relay.",
)
REDRIVES = Counter(
    "ragline_redrives_total",
    "Documents the reconciler restarted or failed, by reason (stalled, broker_restart, "
    "startup) and action (redriven, failed).",
    ["reason", "action"],
)
DEAD_LETTERS = Counter(
    "ragline_dead_letters_total",
    "Messages a stage gave up on, by stage.",
    ["stage"],
)
SEARCH_CACHE = Counter(
    "ragline_search_cache_total",
    "Search cache lookups by layer (access, embedding, result; memory: answers held in the "
    "process) and result (hit, miss).",
    ["layer", "result"],
)
GC_PAUSES = Histogram(
    "ragline_gc_pause_seconds",
    "Pauses of the interpreter's garbage collector, by generation collected (2: a full one).",
    ["generation"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0),
)
GC_FROZEN_OBJECTS = Gauge(
    "ragline_gc_frozen_objects",
    "Objects made while the process started, frozen out of the garbage collector's walks.",
)
SEARCH_ANSWERS_HELD = Gauge(
    "ragline_search_answers_held_bytes",
    "Bytes of search answers held in this process's memory (answered without Redis).",
)
TENANT_REQUESTS = Counter(
    "ragline_tenant_requests_total",
    "Requests per tenant: searches (any form), and API calls of the tenant's tokens.",
    ["tenant", "kind"],
)
RATE_LIMITED = Counter(
    "ragline_rate_limited_total",
    "Requests over a rate limit, by kind (upload, search); searches over it may still have "
    "been answered from the cache.",
    ["kind"],
)
RATE_LIMIT_ERRORS = Counter(
    "ragline_rate_limit_errors_total",
    "Rate limits not checked because Redis did not answer (the request was let through).",
)
PARSER_STARTED = Counter(
    "ragline_parser_processes_started_total",
    "Parser processes the extract stage started (one ahead of the first file, then one for "
    "each that was stopped).",
)
PARSER_STOPPED = Counter(
    "ragline_parser_processes_stopped_total",
    "Parser processes stopped after a file, by why: crashed (a file ended it: out of memory, "
    "a crash in native code), abandoned (killed mid-file: the stage's time limit, or the "
    "worker gave up on the document), recycled (it grew past half of its memory limit).",
    ["reason"],
)
for _reason in ("crashed", "abandoned", "recycled"):
    PARSER_STOPPED.labels(_reason)
MONGO_COMMANDS = Counter(
    "ragline_mongo_commands_total",
    "MongoDB commands this process sent, by command (insert, find, update, ...) and the "
    "collection it named (empty for commands on no collection, such as commitTransaction).",
    ["command", "collection"],
)
VECTOR_STORE_OPTIMIZATIONS = Counter(
    "ragline_vector_store_optimizations_total",
    "Optimisations of the embedded vector store (index built, deleted points dropped, old "
    "segments released), by what started them: idle (writes paused) or interval (writes "
    "that never pause).",
    ["trigger"],
)
for _trigger in ("idle", "interval"):
    VECTOR_STORE_OPTIMIZATIONS.labels(_trigger)


class MallocCollector(Collector):
    """`ragline_malloc_bytes{kind}`: malloc's figures, read once per scrape (none without
    glibc)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = malloc_info()
        if not info:
            return
        family = GaugeMetricFamily(
            "ragline_malloc_bytes",
            "What the C allocator (glibc's malloc) holds, summed over its arenas, by kind: "
            "in_use (live native allocations and Python's large objects), free (freed, kept by "
            "malloc), heap (its arenas), mmapped (large blocks, each mapped on its own). A "
            "rising in_use is live memory growing; a rising heap with in_use level is "
            "fragmentation.",
            labels=["kind"],
        )
        for kind, value in info.items():
            family.add_metric([kind], value)
        yield family


REGISTRY.register(MallocCollector())

PYTHON_BLOCKS = Gauge(
    "ragline_python_allocated_blocks",
    "Memory blocks the Python interpreter holds (`sys.getallocatedblocks`): its live objects.",
)
PYTHON_BLOCKS.set_function(sys.getallocatedblocks)
MIGRATION_TOTAL = Gauge(
    "ragline_migration_chunks_total",
    "Live chunks a generation being built copies (counted as its copy began), by generation.",
    ["generation"],
)
MIGRATION_CHUNKS = Counter(
    "ragline_migration_chunks_copied_total",
    "Chunks embedded by a new generation's model and written into it by this process's "
    "migration, by generation.",
    ["generation"],
)
GENERATIONS = Gauge(
    "ragline_generations",
    "Generations of the vector store whose stores exist, by state (live, building, retired), "
    "as this process last read them.",
    ["state"],
)

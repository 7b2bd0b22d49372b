"""Search latency and throughput through the real endpoint, over two stores side by side, and
the query encoder alone, in one run.

    .venv/bin/python -m benchmarks.search [--chunks 100000 1000000]
                                          [--large-stores distinct duplicates]
    .venv/bin/python -m benchmarks.search --tiny      # 2,000 chunks, about a minute (`make test`)
    .venv/bin/python -m benchmarks.search --user-form [--tiny]
    .venv/bin/python -m benchmarks.search --prepare   # only embed the real chunks (see below)

Two stores, each filled fresh for each size (`--chunks`) in a local default's vector store
(`benchmarks/search_stores.py` says how their texts and vectors are made):

- duplicate-heavy (`duplicates`): the man-page benchmark's chunks again and again under many
  documents, each copy's real vector slightly perturbed (Gaussian noise of 0.02 per dimension,
  normalised): at 100,000 chunks every text is stored about 43 times, 13 of them in the KBs the
  bot searches, so every answer folds a dozen copies per passage;
- distinct texts (`distinct`): real chunks of the man pages, the Debian Reference, the Debian
  Policy Manual, the Python 3.11 documentation (`make benchmark-documents`) and the test
  fixtures, each text once, topped up with new texts made of two real chunks' sentences (or one
  chunk's words in a new order) whose vectors mix their sources' real vectors, lightly
  perturbed. No text is stored twice (`max_copies_of_a_text` says so). Real chunks keep their
  documents and chunk indexes; made chunks come in documents of 8.

Real chunks are embedded with the product's embedder (`infra.embedding.factory`), at ~20
chunks/s on two cores: their vectors are cached under `--cache-dir` (default
`.ragline/bench-cache`), keyed by the hash of the model id and the text, so only the first run
pays (about 16,000 chunks when every source is there: 13 minutes on a quiet machine, 35 on a
busy one; `--prepare` does only that). Every size below a million measures both stores; from a
million on, the stores in `--large-stores` (default the distinct one: the issue's goals at a
million are on it; `--large-stores distinct duplicates` measures today's duplicate-heavy
million too).

For each store: its KBs are created and its chunks written across 10 KBs by this process (the
API is not running: this process owns the store), its HNSW index built, then the recall@10 of
the store's dense search against an exact search (`VectorQuery.exact`, the same query without
the index and its quantisation) is measured in-process over 200 queries in the bot's scope;
then the API alone starts (`stack settings` are printed: the per-bot search rate is lifted, the
load being one bot at up to 32 searches at once; the query model's ONNX export is kept under
`--cache-dir` for every API process of the run and the next runs) and a bot over 3 of the 10
KBs searches (hybrid, the default) at concurrency 1, 8 and 32: uncached (every request a query
never asked before; query embedding included) and cached (the same query again). On the
duplicate-heavy store below a million, the same bot's search through MCP `knowledge_search` is
timed beside the HTTP contract. The stores share one set of servers (each its own MongoDB
database, Redis database and run directory, so no answer or query vector is cached across
stores).

Before the stores and again after them, the encoder alone
(`benchmarks.encoder.measure_encoder`, the mean of both runs, as this machine's speed drifts):
the product's embedder built as the API builds it, its `embed_queries` one query at a time
(p50/p95 ms) and in batches of 32 (queries/s). Then `ratio_uncached_c32_to_encoder` = uncached
requests/s at concurrency 32 over the encoder's batched queries/s.

Queries: the man pages' descriptions (`--eval`, default `../shared/eval/manpages.json`), three
variants of each; where that corpus is absent, the committed evaluation sets' queries
(`benchmarks/eval`) and the duplicate-heavy store is made of the other real chunks instead.
What was used is printed.

The last line printed is one JSON object. Keys `p50_ms_`, `p95_ms_`, `p99_ms_` and `rps_` of
`uncached_c1`, `uncached_c8`, `uncached_c32`, `cached_c1`, `cached_c8`, `cached_c32`, and
`api_peak_rss_mb`, `store_disk_mb`, `fill_s`, `recall_at_10_quantised`,
`ratio_uncached_c32_to_encoder`, `max_copies_of_a_text`, `real_chunks`, `made_chunks`, each
with its store's and size's suffix (`search_stores.suffix`): none for the duplicate-heavy store
at 100,000 (`p95_ms_uncached_c1`, as before), `_distinct` for the distinct store at 100,000
(`p95_ms_uncached_c1_distinct`), `_1m` for the distinct store at a million
(`p95_ms_uncached_c1_1m`, `api_peak_rss_mb_1m`, `recall_at_10_quantised_1m`), `_duplicates_1m`
for the duplicate-heavy one at a million, and `_<n>k` after these at other sizes (`--tiny`:
`p95_ms_uncached_c1_2k`, `p95_ms_uncached_c1_distinct_2k`). The MCP comparison's
`p95_ms_contract_uncached_c1`, `p95_ms_mcp_uncached_c1`, `mcp_added_p95_ms` (same suffixes).
Once per run: `encoder_p50_ms_c1`, `encoder_p95_ms_c1`, `encoder_qps_batch32`, `chunks` (the
sizes), `stores` (per size), `sources` (real chunks per source) and `goals`: each of the
goals (`search_stores.GOALS`: distinct 100k uncached c1 p50 <= 10 ms and p95 <= 15 ms;
duplicate-heavy p95 <= 15 ms; on both 100k stores uncached c32 >= 0.8 of the encoder's batched
rate and p95 <= 400 ms, cached c1 p95 <= 1.5 ms and c32 >= 1,000 requests/s; distinct 1M
uncached c32 >= 0.5 of the encoder, c1 p95 <= 35 ms, API peak RSS <= 2,000 MB, recall@10 >=
0.99) with its figure and whether it is met
(null where the run did not measure it); they are printed beside the figures too. At
concurrency 1 and 32 the answers' own timings give each step's p50 and p95 (`steps_uncached_c1`,
`steps_cached_c1`, `steps_uncached_c32`, `steps_cached_c32`: access, limit, cache, embedding,
ranking, fetch, shaping, writes, total, and `transport`, what the client waited beyond the
server's total; at 32 clients a step's time includes what it waited for the cores). The load
generator is a lean asyncio HTTP/1.1 client in this process, on the same two cores as the server.

The bot benchmark's chunks are readable by `["role:admin", "tenant"]`, so the bot (which reads
`tenant`) and admins see all of them.

`--store-process` measures each store once more served by a process of its own
(`python -m ragline.store`, `infra/vectorstore/remote.py`), the API reaching it over a Unix
socket: uncached searches at concurrency 1 and 32 on questions no other measurement asked, keys
`p50_ms_store_process_uncached_c32`, `rps_store_process_uncached_c32`, ... beside the same
keys of the API holding the store; then with a second API process on that store, the 32
connections spread over both (`rps_store_process_2apis_uncached_c32`, ...): whether the one
interpreter lock a process has is what bounds 32 clients.

`--user-form` measures people's permission-filtered search instead, on a duplicate-heavy store
of its own (100,000 chunks in 10 KBs; `--tiny` 2,000) where the user `u-bench` may read
exactly 10% of the chunks: chunk n has readers `["role:admin", "user:u-bench"]` when
n % 20 == 0 (5%), `["role:admin", "audience:bench-crew"]` (an audience whose only member is
u-bench) when n % 20 == 10 (5%), and otherwise `["role:admin", "user:owner-<n % 50>"]`,
private to one of 50 other users (90%). No chunk is readable by `tenant`. The user's token and
audience are made in-process before the API starts. Side by side in one run, uncached,
concurrency 1, in alternating rounds of fresh queries (150 each): the user's search (`POST
/api/v1/knowledge/search`, dense and hybrid, top 10) and the unfiltered search (the tenant
form over the same KBs, as an admin, which reads everything: a bot reading `tenant` would
find nothing here). Every passage the user gets must be readable by them, or the run fails.
And the recall@10 of the filtered dense query against an exact filtered brute-force search
over the same vectors (numpy, over the chunks u-bench may read), for 200 queries, measured
in-process on the store before the API starts. Keys: `p50_ms_user_dense_c1`,
`p95_ms_user_dense_c1`, `p95_ms_user_hybrid_c1`, `p95_ms_unfiltered_dense_c1`,
`p95_ms_unfiltered_hybrid_c1`, ..., `recall_at_10_user_filtered` and `user_readable_share`
(counted from what was written); each form's step table (`steps_user_hybrid_c1`, ...); and
`ratio_p95_user_to_unfiltered_dense` and `_hybrid`, the person's p95 over the unfiltered
search's, judged in `goals` against `search_stores.USER_FORM_GOALS` (at most 1.2). `--chunks`
sets the store's size (its first size).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from core.retrieval import RetrievalMode
from core.sparse import SparseVector

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks import store_snapshots
from benchmarks.encoder import measure_encoder
from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb
from benchmarks.results import add_results_option, judge, publish
from benchmarks.search_stores import (
    DISTINCT,
    DUPLICATES,
    FIXTURE_FILES,
    FIXTURES,
    GOALS,
    LARGE_CHUNKS,
    STORES,
    USER_FORM_GOALS,
    SourceChunk,
    TextMaker,
    VectorCache,
    distinct_texts,
    embed_cached,
    file_chunks,
    manpage_chunks,
    manual_files,
    spread_sample,
    suffix,
    text_hash,
)
from benchmarks.stack import announce
from core.filters import SearchScope
from core.sparse import SparseEncoder, packed_terms
from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env
from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.mongo.indexes import ensure_indexes
from infra.settings import Settings
from infra.settings.embedding import EmbeddingSettings
from infra.settings.ingest import ChunkingSettings
from infra.vectorstore.base import (
    ChunkPoint,
    VectorQuery,
    VectorStore,
)
from infra.vectorstore.edge import EdgeVectorStore
from ragline.system import System
from schemas.chunks import ChunkPayload
from schemas.domain import ChunkRecord, KnowledgeBase, Role, chunk_id, chunk_point_id

KBS = 10
ATTACHED = 3
LEVELS = (1, 8, 32)
# The user form's reader, the audience they are in, and how many other owners there are.
USER, AUDIENCE, OWNERS = "u-bench", "bench-crew", 50
USER_PRINCIPALS = ("tenant", f"user:{USER}", f"audience:{AUDIENCE}")
USER_PRINCIPALS_SET = frozenset(USER_PRINCIPALS)
# What the bot reads.
BOT_PRINCIPALS = ("tenant",)
# Made chunks of the distinct store come in documents of this many chunks.
MADE_DOCUMENT_CHUNKS = 8
# Noise added to each copy's vector in the duplicate-heavy store (per dimension).
COPY_NOISE = 0.02
WRITE_BATCH = 1000
EVAL_DIR = Path(__file__).parent / "eval"
# The load this benchmark makes: one bot asking up to 32 searches at once, far above the
# service's default per-bot rate (which would answer 429).
LOAD_SETTINGS = {"RAGLINE_LIMITS__SEARCHES_PER_SECOND": "1000000"}
ONNX_DIR = "RAGLINE_EMBEDDING__ONNX_DIR"


@dataclass(frozen=True)
class Scale:
    """How much one run measures."""

    chunks: tuple[int, ...] = (100_000, LARGE_CHUNKS)
    # Uncached requests at concurrency 1 (twice as many at 8 and 32; cached: twice those).
    requests: int = 200
    # Rounds of 5 queries per form in the MCP comparison, and of the user form.
    mcp_rounds: int = 60
    user_rounds: int = 30
    recall_queries: int = 200
    encoder_queries: int = 200
    # At most this many real chunks (None: all there are), read from at most this many files
    # of each manual.
    real_chunks: int | None = None
    files_per_manual: int | None = None


TINY = Scale(
    chunks=(2_000,),
    requests=30,
    mcp_rounds=4,
    user_rounds=4,
    recall_queries=20,
    encoder_queries=40,
    real_chunks=60,
    files_per_manual=2,
)


def everyone(_: int) -> list[str]:
    """The bot benchmark: every chunk readable by the whole tenant."""
    return ["role:admin", "tenant"]


def one_in_ten(n: int) -> list[str]:
    """The user form: chunk n is the bench user's (5%), their audience's (5%), or one of 50
    other users' private items (90%)."""
    if n % 20 == 0:
        return ["role:admin", f"user:{USER}"]
    if n % 20 == 10:
        return ["role:admin", f"audience:{AUDIENCE}"]
    return ["role:admin", f"user:owner-{n % OWNERS}"]


# -- what the stores are made of ------------------------------------------------------------


@dataclass
class Material:
    """The real chunks of both stores, their vectors, and the questions asked."""

    questions: list[str]
    duplicates: list[SourceChunk]
    real: list[SourceChunk]
    sources: dict[str, int]
    duplicates_vectors: NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )
    real_vectors: NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )


def committed_questions() -> list[str]:
    """The committed evaluation sets' queries (where the man-page corpus is absent)."""
    multiformat, paraphrase, exact = (
        json.loads((EVAL_DIR / name).read_text())
        for name in ("multiformat.json", "paraphrase.json", "exact_terms.json")
    )
    return [
        *(q["text"] for q in multiformat["queries"].values()),
        *(q["text"] for q in paraphrase["questions"].values()),
        *(q["text"] for q in exact["queries"].values()),
    ]


def variants(questions: list[str], needed: int) -> list[str]:
    """Enough distinct questions: each one, then each with ` (1)`, ` (2)`, ..."""
    rounds = max(1, math.ceil(needed / len(questions)))
    return [f"{q} ({n})" if n else q for n in range(rounds) for q in questions]


def load_material(eval_path: Path, scale: Scale, needed: int) -> Material:
    """The stores' real chunks (chunked as the pipeline does) and the questions."""
    chunking = ChunkingSettings()
    sources: dict[str, int] = {}
    manpages: list[SourceChunk] = []
    if eval_path.is_file():
        data = json.loads(eval_path.read_text())
        manpages = manpage_chunks(data["corpus"], chunking)
        questions = list(data["queries"].values())
        sources["man pages"] = len(manpages)
        print(f"questions: the {len(questions)} man-page descriptions of {eval_path}")
    else:
        questions = committed_questions()
        print(
            f"{eval_path} not found (the man-page corpus): the {len(questions)} queries of the "
            f"committed evaluation sets are asked, and the duplicate-heavy store repeats the "
            f"other real chunks"
        )
    real = list(manpages)
    for package, paths in manual_files().items():
        if not paths:
            print(f"{package} is not installed (`make benchmark-documents`): not in the store")
            continue
        if scale.files_per_manual is not None:
            step = max(1, len(paths) // scale.files_per_manual)
            paths = paths[::step][: scale.files_per_manual]
        chunks = file_chunks(paths, chunking)
        sources[package] = len(chunks)
        real += chunks
    fixtures = file_chunks((FIXTURES / name for name in FIXTURE_FILES), chunking)
    sources["tests/fixtures"] = len(fixtures)
    real = distinct_texts(real + fixtures)
    print(f"real chunks: {sources}; {len(real)} distinct texts")
    real = spread_sample(real, scale.real_chunks)
    duplicates = spread_sample(distinct_texts(manpages) or real, scale.real_chunks)
    return Material(variants(questions, needed), duplicates, real, sources)


def embed_material(material: Material, cache: VectorCache) -> None:
    """The real chunks' vectors, from the cache or embedded by the product's embedder (loaded
    only if some are missing) and cached."""
    loaded: list[Embedder] = []

    def load() -> Embedder:
        if not loaded:
            loaded.append(build_embedder(EmbeddingSettings()))
        return loaded[0]

    started = time.perf_counter()
    material.duplicates_vectors = embed_cached(
        [c.record.embedding_text for c in material.duplicates], cache, load
    )
    material.real_vectors = embed_cached(
        [c.record.embedding_text for c in material.real], cache, load
    )
    print(f"real chunks' vectors ready in {time.perf_counter() - started:.0f} s")
    for embedder in loaded:  # its model copies are not needed any more
        close = getattr(embedder, "close", None)
        if callable(close):
            close()


# -- filling a store ----------------------------------------------------------------------


@dataclass
class Written:
    """What was written: point ids, readers, documents, how often each text; with `keep`, the
    unit vectors (for an exact search here)."""

    keep: bool
    point_ids: list[str] = field(default_factory=list)
    readers: list[list[str]] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    vectors: list[NDArray[np.float32]] = field(default_factory=list)
    copies: Counter[int] = field(default_factory=Counter)
    real: int = 0
    made: int = 0

    def matrix(self) -> NDArray[np.float32]:
        """The vectors written, one row per chunk."""
        return np.stack(self.vectors)

    def readable(self) -> NDArray[np.bool_]:
        """Which chunks the bench user may read."""
        return np.array([not USER_PRINCIPALS_SET.isdisjoint(r) for r in self.readers])


@dataclass(frozen=True)
class Chunk:
    """One chunk to write, before it becomes a point."""

    document_id: str
    kb: int
    record: ChunkRecord
    title: str
    vector: NDArray[np.float32]
    sparse: SparseVector
    readers: list[str]


class Writer:
    """Writes chunks to the store in batches and keeps what `Written` keeps."""

    def __init__(self, store: VectorStore, kb_ids: list[str], total: int, keep: bool) -> None:
        self.store = store
        self.kb_ids = kb_ids
        self.total = total
        self.written = Written(keep)
        self.batch: list[ChunkPoint] = []
        self.started = time.perf_counter()

    async def add(self, chunk: Chunk) -> None:
        """One chunk more."""
        record = chunk.record
        point_id = chunk_point_id(chunk.document_id, record.chunk_index)
        kb_id = self.kb_ids[chunk.kb]
        written = self.written
        written.point_ids.append(point_id)
        written.readers.append(chunk.readers)
        written.document_ids.append(chunk.document_id)
        written.copies[text_hash(record.text)] += 1
        if written.keep:
            written.vectors.append(chunk.vector)
        self.batch.append(
            ChunkPoint(
                point_id=point_id,
                dense=chunk.vector,
                sparse=chunk.sparse,
                payload=ChunkPayload(
                    tenant_id="default",
                    kb_id=kb_id,
                    document_id=chunk.document_id,
                    chunk_id=chunk_id(chunk.document_id, record.chunk_index),
                    chunk_index=record.chunk_index,
                    chunk_text=record.text,
                    context=record.context,
                    terms=packed_terms(record.embedding_text),
                    active=True,
                    readers=chunk.readers,
                    source_name=f"{chunk.document_id}.md",
                    document_title=chunk.title,
                    page=record.page,
                    heading_path=record.heading_path,
                    start=record.start,
                    end=record.end,
                    source_key=f"file:{chunk.document_id}.md",
                    version=1,
                    url=None,
                ),
            )
        )
        if len(self.batch) == WRITE_BATCH:
            await self.flush()
            done = len(written.point_ids)
            if done % 100_000 == 0 and done < self.total:
                print(f"  {done} chunks written in {time.perf_counter() - self.started:.0f} s")

    async def flush(self) -> None:
        """Writes what is pending."""
        await self.store.upsert(self.batch)
        self.batch = []


async def write_duplicates(
    writer: Writer, material: Material, readers_of: Callable[[int], list[str]] = everyone
) -> None:
    """The duplicate-heavy store: the base chunks again and again, each copy a document of
    its own whose vector is moved a little; chunk n readable by `readers_of(n)`."""
    base, vectors = material.duplicates, material.duplicates_vectors
    encoder = SparseEncoder()
    sparse = [encoder.document(chunk.record.embedding_text) for chunk in base]
    rng = np.random.default_rng(7)
    for n in range(writer.total):
        at = n % len(base)
        document_id = f"doc_bench{n // len(base):03d}{at:05d}"
        noisy = vectors[at] + rng.normal(scale=COPY_NOISE, size=vectors.shape[1])
        record = base[at].record.model_copy(
            update={"chunk_index": 0, "start": 0, "end": len(base[at].record.text)}
        )
        await writer.add(
            Chunk(
                document_id,
                n % KBS,
                record,
                document_id,  # titled by its id: the user form checks what it may read by it
                (noisy / np.linalg.norm(noisy)).astype(np.float32),
                sparse[at],
                readers_of(n),
            )
        )
    writer.written.real = min(writer.total, len(base))


async def write_distinct(writer: Writer, material: Material) -> None:
    """The distinct store: the real chunks, each once, in their documents; then made chunks in
    documents of `MADE_DOCUMENT_CHUNKS`, as many as the size needs."""
    encoder = SparseEncoder()
    real = spread_sample(material.real, writer.total)
    rows = {id(chunk): row for row, chunk in enumerate(material.real)}
    documents: dict[str, int] = {}
    for chunk in real:
        number = documents.setdefault(chunk.document, len(documents))
        await writer.add(
            Chunk(
                f"doc_real{number:06d}",
                number % KBS,
                chunk.record,
                chunk.title,
                material.real_vectors[rows[id(chunk)]],
                encoder.document(chunk.record.embedding_text),
                everyone(0),
            )
        )
    made = writer.total - len(real)
    if made > 0:
        maker = TextMaker([c.record.text for c in material.real], material.real_vectors)
        for m in range(made):
            new = maker.make()
            source = material.real[new.first]
            index = m % MADE_DOCUMENT_CHUNKS
            record = source.record.model_copy(
                update={"chunk_index": index, "text": new.text, "start": 0, "end": len(new.text)}
            )
            number = m // MADE_DOCUMENT_CHUNKS
            await writer.add(
                Chunk(
                    f"doc_made{number:07d}",
                    number % KBS,
                    record,
                    source.title,
                    new.vector,
                    encoder.document(record.embedding_text),
                    everyone(0),
                )
            )
        print(f"  made {made} new texts ({maker.redrawn} drawn again: equal to one already made)")
    writer.written.real, writer.written.made = len(real), max(0, made)


@dataclass
class Filled:
    """A filled store: its KBs, what was written (counts, and how long filling took), whether
    it is a kept one, its dense recall."""

    kb_ids: list[str]
    written: dict[str, Any]
    reused: bool = False
    recall: float | None = None


def material_texts(material: Material, store_kind: str) -> list[str]:
    """The texts a store of the kind is made from (what its snapshot's name hashes)."""
    chunks = material.duplicates if store_kind == DUPLICATES else material.real
    return [chunk.record.embedding_text for chunk in chunks]


async def fill_store(
    settings: Settings,
    store_kind: str,
    total: int,
    material: Material,
    queries: list[str],
    encoder: Embedder,
    cache_dir: Path,
) -> Filled:
    """The store of the kind and size in this run's directory: a kept one copied in
    (`store_snapshots`), or its KBs created and `total` chunks written across them (the API is
    not running yet: this process owns the store) and kept for the next runs. Then its HNSW
    index is built (or rebuilt, if its settings changed) and, with `queries`, the dense
    search's recall@10 in the bot's scope is measured against an exact search."""
    name = store_snapshots.key(
        store_kind, total, encoder.model_id, material_texts(material, store_kind)
    )
    vectors = settings.vector_store_path
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        await ensure_indexes(system.db)
        kept = store_snapshots.find(cache_dir, name)
        if kept is not None:
            begun = time.perf_counter()
            await store_snapshots.restore(kept, vectors, system.db)
            print(f"reused the kept store {kept.path} ({time.perf_counter() - begun:.0f} s)")
            fresh = None
        else:
            fresh = await write_store(system, store_kind, total, material)
    if fresh is not None:
        kept = store_snapshots.save(cache_dir, name, vectors, fresh.kbs, fresh.written)
        print(f"kept the store as {kept.path}")
    assert kept is not None
    filled = Filled(kept.kb_ids, kept.written, reused=fresh is None)
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        _, store = await (await system.open_vector_store()).live_store()
        if isinstance(store, EdgeVectorStore):
            begun = time.perf_counter()
            await store.optimize()
            print(f"optimised the store in {time.perf_counter() - begun:.0f} s")
        if queries:
            scope = SearchScope("default", tuple(filled.kb_ids[:ATTACHED]), BOT_PRINCIPALS)
            filled.recall = await dense_recall(store, encoder, scope, queries)
    return filled


@dataclass(frozen=True)
class Fresh:
    """A store filled by this run: its KB records and what was written (counts)."""

    kbs: list[KnowledgeBase]
    written: dict[str, Any]


async def write_store(system: System, store_kind: str, total: int, material: Material) -> Fresh:
    """Creates the KBs, writes `total` chunks of the kind across them and builds the HNSW
    index; the store is closed with the system."""
    _, store = await (await system.open_vector_store()).live_store()
    kbs = [await system.knowledge_base_service.create("default", f"KB {n}") for n in range(KBS)]
    started = time.perf_counter()
    writer = Writer(store, [kb.id for kb in kbs], total, keep=False)
    if store_kind == DUPLICATES:
        await write_duplicates(writer, material)
    else:
        await write_distinct(writer, material)
    await writer.flush()
    print(f"wrote {total} chunks in {time.perf_counter() - started:.0f} s")
    if isinstance(store, EdgeVectorStore):
        begun = time.perf_counter()
        await store.optimize()
        print(f"built the HNSW index in {time.perf_counter() - begun:.0f} s")
    written = writer.written
    counts = {
        "max_copies_of_a_text": max(written.copies.values()),
        "real_chunks": written.real,
        "made_chunks": written.made,
        "fill_s": round(time.perf_counter() - started),
    }
    return Fresh(kbs, counts)


async def dense_recall(
    store: VectorStore, encoder: Embedder, scope: SearchScope, queries: list[str]
) -> float:
    """Mean recall@10 of the store's dense search against its exact search (no HNSW index, no
    quantised vectors: `VectorQuery.exact`) in the same scope."""
    recalls = []
    for vector in encoder.embed_queries(queries):
        query = VectorQuery(scope, vector, 10, mode=RetrievalMode.DENSE)
        found = {hit.point_id for hit in await store.search(query)}
        exact = await store.search(dataclasses.replace(query, exact=True))
        wanted = {hit.point_id for hit in exact}
        recalls.append(len(wanted & found) / max(1, len(wanted)))
    print(
        f"dense search, {len(queries)} queries in the bot's {ATTACHED} KBs: recall@10 "
        f"{statistics.mean(recalls):.4f} (min {min(recalls):.2f}) against the exact search"
    )
    return statistics.mean(recalls)


async def filtered_recall(
    store: VectorStore,
    embedder: Embedder,
    kb_ids: list[str],
    written: Written,
    queries: list[str],
) -> float:
    """Mean recall@10 of the store's filtered dense query against an exact brute-force search
    over the chunks the bench user may read."""
    readable = written.readable()
    candidates = np.flatnonzero(readable)
    vectors = written.matrix()
    scope = SearchScope("default", tuple(kb_ids), USER_PRINCIPALS)
    recalls = []
    for vector in embedder.embed_queries(queries):
        exact = candidates[np.argsort(-(vectors[candidates] @ vector))[:10]]
        wanted = {written.point_ids[i] for i in exact}
        found = await store.search(VectorQuery(scope, vector, 10, mode=RetrievalMode.DENSE))
        recalls.append(len(wanted & {hit.point_id for hit in found}) / len(wanted))
    print(
        f"filtered dense search, {len(queries)} queries over the {len(candidates)} chunks "
        f"({len(candidates) / len(readable):.0%}) the user may read: recall@10 "
        f"{statistics.mean(recalls):.4f} (min {min(recalls):.2f})"
    )
    return statistics.mean(recalls)


# -- the load -------------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection that posts JSON and times the answers."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        host = f"{self._host}:{self._port}"
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
        head += "Content-Type: application/json\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self._writer.write(head.encode() + body)
        status_line = await self._reader.readline()
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self._reader.readexactly(length)
        return int(status_line.split()[1]), payload

    async def close(self) -> None:
        """Closes the connection."""
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()
            self._writer = None


@dataclass(frozen=True)
class Form:
    """A search form: where it is posted, as whom, and the body around the query."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # An MCP tool: the body is its arguments, posted as one JSON-RPC `tools/call`.
    tool: str | None = None

    def encode(self, query: str) -> bytes:
        """The request body for one query."""
        arguments = {**self.body, "query": query}
        if self.tool is None:
            return json.dumps(arguments).encode()
        call = {"name": self.tool, "arguments": arguments}
        return json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        ).encode()


def mcp_form(token: str) -> Form:
    """An agent's `knowledge_search` over MCP with a bot's token (stateless: one POST)."""
    return Form(
        "/mcp",
        {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
        {},
        tool="knowledge_search",
    )


def bot_form(bot_id: str) -> Form:
    """The agent runtime's search for a bot."""
    return Form(
        "/api/v1/internal/knowledge/search",
        {"X-Internal-Secret": SECRET},
        {"bot_id": bot_id, "session_id": "bench"},
    )


async def load(
    port: int | Sequence[int],
    form: Form,
    queries: list[str],
    concurrency: int,
    breakdown: list[dict[str, Any]] | None = None,
    answers: list[dict[str, Any]] | None = None,
) -> tuple[list[float], float]:
    """Sends the queries with `concurrency` connections (spread over the ports, when there are
    several API processes); returns latencies (ms) and rps.

    With `breakdown`, collects the answers' own timings (their `metrics` blocks); with
    `answers`, the whole answers.
    """
    pending = list(enumerate(queries))
    latencies: list[float] = []
    ports = [port] if isinstance(port, int) else list(port)

    async def worker(number: int) -> None:
        connection = Connection("127.0.0.1", ports[number % len(ports)])
        try:
            while pending:
                _, query = pending.pop()
                started = time.perf_counter()
                status, payload = await connection.post(form.path, form.encode(query), form.headers)
                latencies.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise RuntimeError(f"search answered {status}: {payload[:200]!r}")
                if breakdown is not None:
                    breakdown.append(json.loads(payload)["metrics"])
                if answers is not None:
                    answers.append(json.loads(payload))
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(number) for number in range(concurrency)))
    return latencies, len(queries) / (time.perf_counter() - started)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated."""
    return float(np.percentile(values, q))


# The server's steps of a search as its answer's `metrics` report them (`services.search.clock`).
STEPS = ("access", "limit", "cache", "embedding", "ranking", "fetch", "shaping", "writes")


def step_budget(breakdown: list[dict[str, Any]], latencies: list[float]) -> dict[str, Any]:
    """p50 and p95 of each step's time, of the server's whole time (`total`) and of what the
    client waited beyond it (`transport`: HTTP, parsing and serialising around the service)."""
    columns = {step: [m[f"{step}_ms"] for m in breakdown] for step in STEPS}
    columns["total"] = [m["total_ms"] for m in breakdown]
    columns["transport"] = [
        max(0.0, waited - m["total_ms"]) for waited, m in zip(latencies, breakdown, strict=True)
    ]
    return {
        name: {"p50": round(percentile(values, 50), 3), "p95": round(percentile(values, 95), 3)}
        for name, values in columns.items()
    }


def print_budget(label: str, budget: dict[str, Any]) -> None:
    """The step table, one line."""
    parts = "  ".join(f"{name} {v['p50']:.2f}/{v['p95']:.2f}" for name, v in budget.items())
    print(f"{label}, server steps p50/p95 ms: {parts}")


# The concurrency levels whose answers' own timings give a step table: one client, where each
# step's own cost shows, and the most, where what the steps wait for shows.
STEP_LEVELS = (LEVELS[0], LEVELS[-1])


async def measure(port: int, bot_id: str, questions: list[str], scale: Scale) -> dict[str, Any]:
    """Every concurrency level, uncached then cached; at `STEP_LEVELS`, each step's budget."""
    figures: dict[str, tuple[list[float], float]] = {}
    budgets: dict[str, Any] = {}
    fresh = iter(questions)
    form = bot_form(bot_id)
    for level in LEVELS:
        count = scale.requests if level == 1 else 2 * scale.requests
        uncached = [next(fresh) for _ in range(count)]
        hot = questions[-1]
        for name, asked in (("uncached", uncached), ("cached", [hot] * count * 2)):
            if name == "cached":
                await load(port, form, [hot], 1)  # the answer is now cached
            breakdown: list[dict[str, Any]] | None = [] if level in STEP_LEVELS else None
            latencies, rps = await load(port, form, asked, level, breakdown)
            figures[f"{name}_c{level}"] = (latencies, rps)
            if breakdown is not None:
                budgets[f"steps_{name}_c{level}"] = step_budget(breakdown, latencies)
                print_budget(f"{name} c{level}", budgets[f"steps_{name}_c{level}"])
    return summarise(figures) | budgets


async def measure_mcp(
    port: int, bot_id: str, token: str, questions: list[str], rounds: int
) -> dict[str, Any]:
    """The same bot's search through the HTTP contract and through MCP `knowledge_search`,
    uncached, concurrency 1, in alternating rounds of fresh queries: what MCP adds."""
    forms = {"contract": bot_form(bot_id), "mcp": mcp_form(token)}
    fresh = iter(reversed(questions))  # queries `measure` did not ask
    timings: dict[str, list[float]] = {name: [] for name in forms}
    spent: dict[str, float] = dict.fromkeys(forms, 0.0)
    for _ in range(rounds):
        for name, form in forms.items():
            batch = [next(fresh) for _ in range(5)]
            latencies, rps = await load(port, form, batch, 1)
            timings[name] += latencies
            spent[name] += len(batch) / rps
    figures = {
        f"{name}_uncached_c1": (latencies, len(latencies) / spent[name])
        for name, latencies in timings.items()
    }
    result = summarise(figures)
    added = result["p95_ms_mcp_uncached_c1"] - result["p95_ms_contract_uncached_c1"]
    print(f"MCP adds {added:.2f} ms at p95 over the HTTP contract")
    result["mcp_added_p95_ms"] = round(added, 2)
    return result


def summarise(figures: dict[str, tuple[list[float], float]]) -> dict[str, Any]:
    """Prints and returns each measurement's percentiles and throughput."""
    result: dict[str, Any] = {}
    for name, (latencies, rps) in figures.items():
        p50, p95, p99 = (percentile(latencies, q) for q in (50, 95, 99))
        print(
            f"{name:>12}: p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  p99 {p99:6.2f} ms  "
            f"{rps:7.1f} requests/s  (mean {statistics.mean(latencies):.2f} ms)"
        )
        result[f"p50_ms_{name}"] = round(p50, 2)
        result[f"p95_ms_{name}"] = round(p95, 2)
        result[f"p99_ms_{name}"] = round(p99, 2)
        result[f"rps_{name}"] = round(rps, 1)
    return result


def directory_mb(path: Path) -> float:
    """Bytes under a directory, in MB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


# -- one store, end to end ------------------------------------------------------------------


@dataclass
class Run:
    """What every store of a run shares: the servers, the material, the encoder."""

    services: LocalServices
    work: Path
    material: Material
    encoder: Embedder
    scale: Scale
    # Where filled stores are kept for the next runs (`store_snapshots`).
    cache_dir: Path
    # Whether each store is measured again served by a process of its own.
    store_process: bool = False
    stores_measured: int = 0

    def env(self, name: str) -> dict[str, str]:
        """A store's stack: its own run directory, MongoDB database and Redis database."""
        self.stores_measured += 1
        redis = f"redis://127.0.0.1:{self.services.redis_port}/{self.stores_measured % 16}"
        return {
            **pipeline_env(self.services, self.work / name, TOKEN, SECRET),
            "RAGLINE_MONGO__DATABASE": f"bench_{name}",
            "RAGLINE_REDIS__URL": redis,
            "RAGLINE_LOG_LEVEL": "WARNING",
            **LOAD_SETTINGS,
        }


def measure_store(run: Run, store_kind: str, chunks: int) -> dict[str, Any]:
    """One store at one size: fill, recall, start the API, time the searches."""
    name = f"{store_kind}-{chunks}"
    print(f"\n== {store_kind} store, {chunks} chunks ==", flush=True)
    env = run.env(name)
    # The settings the API will read, so the store is filled where it looks.
    os.environ.update(env)
    questions = run.material.questions
    filled = asyncio.run(
        fill_store(
            Settings(),
            store_kind,
            chunks,
            run.material,
            questions[-run.scale.recall_queries :],
            run.encoder,
            run.cache_dir,
        )
    )
    written = filled.written
    result: dict[str, Any] = {
        **written,
        "store_reused": filled.reused,
        "recall_at_10_quantised": round(filled.recall or 0.0, 4),
    }
    print(
        f"store: {chunks} chunks ({written['real_chunks']} real, {written['made_chunks']} "
        f"made), each text stored at most {written['max_copies_of_a_text']} times, in {KBS} "
        f"KBs; the bot searches {ATTACHED} of them (about {chunks * ATTACHED // KBS} chunks), "
        "hybrid, top 4"
    )
    port = free_port()
    pipeline = Pipeline(run.work / name, env, api_port=port)
    try:
        pipeline.start(workers=False)
        bot_id, bot_token = create_bot(pipeline.api_url, filled.kb_ids[:ATTACHED])
        result |= asyncio.run(measure(port, bot_id, questions, run.scale))
        if store_kind == DUPLICATES and chunks < LARGE_CHUNKS:
            result |= asyncio.run(
                measure_mcp(port, bot_id, bot_token, questions, run.scale.mcp_rounds)
            )
        api = next(p for p in pipeline.processes if p.name == "api")
        result["api_peak_rss_mb"] = round(peak_rss_mb(api.pid), 1)
        result["store_disk_mb"] = round(directory_mb(run.work / name / "vectors"), 1)
        print(
            f"API process peak RSS {result['api_peak_rss_mb']} MB, "
            f"store {result['store_disk_mb']} MB on disk"
        )
    finally:
        pipeline.stop()
    if run.store_process:
        result |= measure_store_process(run, name, env, filled.kb_ids[:ATTACHED])
    return result


# The questions the store-process comparison asks: past those `measure` asked (5 * requests).
def store_process_questions(questions: list[str], scale: Scale) -> list[str]:
    """Questions no other measurement of a store asked."""
    start = 5 * scale.requests
    return questions[start : start + 5 * scale.requests]


def measure_store_process(
    run: Run, name: str, env: dict[str, str], kb_ids: list[str]
) -> dict[str, Any]:
    """The same store served by a process of its own (`python -m ragline.store`), the API
    reaching it over its socket: uncached searches at concurrency 1 and 32, beside the API
    process holding it (`*_store_process_uncached_c1`, `*_store_process_uncached_c32` keys);
    then a second API process on the same store, the 32 connections spread over both
    (`*_store_process_2apis_uncached_c32`)."""
    served = {**env, "RAGLINE_QDRANT__STORE_SOCKET": str(run.work / name / "store.sock")}
    port = free_port()
    pipeline = Pipeline(run.work / name, served, api_port=port)
    try:
        pipeline.start_store()
        pipeline.start(workers=False)
        bot_id, _ = create_bot(pipeline.api_url, kb_ids)
        fresh = iter(store_process_questions(run.material.questions, run.scale))
        form = bot_form(bot_id)
        figures = {}
        for level, count in ((1, run.scale.requests), (32, 2 * run.scale.requests)):
            asked = [next(fresh) for _ in range(count)]
            figures[f"store_process_uncached_c{level}"] = asyncio.run(
                load(port, form, asked, level)
            )
        second = int(pipeline.add_api().rsplit(":", 1)[1])
        asked = [next(fresh) for _ in range(2 * run.scale.requests)]
        figures["store_process_2apis_uncached_c32"] = asyncio.run(
            load((port, second), form, asked, 32)
        )
        return summarise(figures)
    finally:
        pipeline.stop()


def create_bot(api_url: str, kb_ids: list[str]) -> tuple[str, str]:
    """A bot over the KBs, and a token of it."""
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        knowledge = {"enabled": True, "kb_ids": kb_ids}
        bot = http.post("/api/v1/bots", json={"name": "bench", "knowledge": knowledge})
        bot.raise_for_status()
        bot_id = str(bot.json()["id"])
        issued = http.post(f"/api/v1/bots/{bot_id}/tokens", json={"name": "bench"})
        issued.raise_for_status()
        return bot_id, str(issued.json()["token"])


# -- the user form --------------------------------------------------------------------------


async def add_bench_user(settings: Settings) -> str:
    """The bench user's token, and their audience."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        _, token = await system.token_service.issue("default", "bench", Role.USER, USER)
        await system.people_service.put_audience("default", AUDIENCE, "the bench user's audience")
        await system.people_service.set_members("default", AUDIENCE, [USER])
        return token


async def measure_user_form(
    port: int,
    token: str,
    kb_ids: list[str],
    questions: list[str],
    readable: frozenset[str],
    rounds: int,
) -> dict[str, Any]:
    """Uncached searches at concurrency 1: the user's (dense, hybrid) beside the unfiltered
    tenant form's over the same KBs. The user's answers must hold only documents in `readable`
    (the benchmark's documents are titled by their ids); short answers are counted."""
    user = {"Authorization": f"Bearer {token}"}
    internal = {"X-Internal-Secret": SECRET}
    tenant_wide = {"tenant_id": "default", "kb_ids": kb_ids, "top_k": 10}
    forms = {
        "user_dense": Form(
            "/api/v1/knowledge/search", user, {"top_k": 10, "retrieval_mode": "dense"}
        ),
        "user_hybrid": Form(
            "/api/v1/knowledge/search", user, {"top_k": 10, "retrieval_mode": "hybrid"}
        ),
        "unfiltered_dense": Form(
            "/api/v1/internal/knowledge/search",
            internal,
            {**tenant_wide, "retrieval_mode": "dense"},
        ),
        "unfiltered_hybrid": Form(
            "/api/v1/internal/knowledge/search",
            internal,
            {**tenant_wide, "retrieval_mode": "hybrid"},
        ),
    }
    fresh = iter(questions)
    for form in forms.values():  # warm-up, on queries of its own
        await load(port, form, [next(fresh) for _ in range(5)], 1)
    # Alternating rounds of 5 queries never asked before: drift hits all alike.
    timings: dict[str, list[float]] = {name: [] for name in forms}
    spent: dict[str, float] = dict.fromkeys(forms, 0.0)
    answers: dict[str, list[dict[str, Any]]] = {name: [] for name in forms}
    breakdowns: dict[str, list[dict[str, Any]]] = {name: [] for name in forms}
    for _ in range(rounds):
        for name, form in forms.items():
            batch = [next(fresh) for _ in range(5)]
            latencies, rps = await load(port, form, batch, 1, breakdowns[name], answers[name])
            timings[name] += latencies
            spent[name] += len(batch) / rps
    for name in forms:
        # A person's answer lists `results`; the internal one, `hits`.
        passages = [answer.get("results", answer.get("hits", [])) for answer in answers[name]]
        results = [r for found in passages for r in found]
        short = sum(len(found) < 10 for found in passages)
        leaked = sum(r["document_title"] not in readable for r in results)
        print(f"{name}: {len(results)} passages, {short} short answers, {leaked} unreadable")
        if name.startswith("user") and (leaked or not results):
            raise RuntimeError(f"{name}: {leaked} unreadable of {len(results)} passages")
    figures = {
        f"{name}_c1": (latencies, len(latencies) / spent[name])
        for name, latencies in timings.items()
    }
    result = summarise(figures)
    for name in forms:
        result[f"steps_{name}_c1"] = step_budget(breakdowns[name], timings[name])
        print_budget(name, result[f"steps_{name}_c1"])
    # A person's search against the same search without the permission filter (as a bot's).
    for mode in ("dense", "hybrid"):
        ratio = result[f"p95_ms_user_{mode}_c1"] / result[f"p95_ms_unfiltered_{mode}_c1"]
        result[f"ratio_p95_user_to_unfiltered_{mode}"] = round(ratio, 3)
    result["goals"] = judge(result, USER_FORM_GOALS)
    for goal, verdict in result["goals"].items():
        print(f"goal {goal}: {verdict['value']} ({'met' if verdict['met'] else 'not met'})")
    return result


async def fill_user_store(
    settings: Settings, chunks: int, material: Material, queries: list[str], encoder: Embedder
) -> tuple[list[str], Written, float]:
    """The user form's store: duplicate-heavy, one chunk in ten readable by the bench user;
    returns the KB ids, what was written and the filtered recall@10."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        await ensure_indexes(system.db)
        _, store = await (await system.open_vector_store()).live_store()
        kbs = system.knowledge_base_service
        kb_ids = [(await kbs.create("default", f"KB {n}")).id for n in range(KBS)]
        writer = Writer(store, kb_ids, chunks, keep=True)
        await write_duplicates(writer, material, one_in_ten)
        await writer.flush()
        if isinstance(store, EdgeVectorStore):
            await store.optimize()
        recall = await filtered_recall(store, encoder, kb_ids, writer.written, queries)
    return kb_ids, writer.written, recall


def measure_user_size(run: Run, chunks: int) -> dict[str, Any]:
    """The user form: fill with one chunk in ten readable by the bench user, measure the
    filtered recall in-process, then start the API and time both forms."""
    name = f"user-{chunks}"
    env = run.env(name)
    os.environ.update(env)
    settings = Settings()
    questions = run.material.questions
    kb_ids, written, recall = asyncio.run(
        fill_user_store(
            settings, chunks, run.material, questions[-run.scale.recall_queries :], run.encoder
        )
    )
    mask = written.readable()
    share = float(mask.mean())
    readable = frozenset(d for d, ok in zip(written.document_ids, mask, strict=True) if ok)
    del written, mask  # the vectors are no longer needed
    token = asyncio.run(add_bench_user(settings))
    port = free_port()
    pipeline = Pipeline(run.work / name, env, api_port=port)
    try:
        pipeline.start(workers=False)
        print(
            f"store: {chunks} chunks in {KBS} KBs; the user may read one in ten; "
            "top 10, uncached, concurrency 1"
        )
        result = asyncio.run(
            measure_user_form(port, token, kb_ids, questions, readable, run.scale.user_rounds)
        )
    finally:
        pipeline.stop()
    result["recall_at_10_user_filtered"] = round(recall, 4)
    result["user_readable_share"] = round(share, 4)
    return result


# -- the run --------------------------------------------------------------------------------


def stores_at(chunks: int, large_stores: Sequence[str]) -> list[str]:
    """The stores measured at a size: both below a million, else those asked for."""
    return list(STORES) if chunks < LARGE_CHUNKS else [s for s in STORES if s in large_stores]


def encoder_settings() -> EmbeddingSettings:
    """The embedder's settings as the API process has them (one model copy: its queries come
    one by one)."""
    return Settings().embedding.model_copy(update={"parallelism": 1})


def time_encoder(encoder: Embedder, queries: list[str]) -> dict[str, float]:
    """One run of the encoder alone, printed."""
    figures = measure_encoder(encoder, queries)
    print(
        f"encoder alone ({encoder.model_id}): one query p50 {figures['encoder_p50_ms_c1']} ms, "
        f"p95 {figures['encoder_p95_ms_c1']} ms; batches of 32: "
        f"{figures['encoder_qps_batch32']} queries/s"
    )
    return figures


def print_goals(goals: dict[str, dict[str, Any]]) -> None:
    """Each goal beside its figure: met, missed, or not measured in this run."""
    for name, verdict in goals.items():
        if verdict["met"] is None:
            print(f"goal {name}: not measured in this run")
        else:
            print(f"goal {name}: {verdict['value']} {'met' if verdict['met'] else 'MISSED'}")


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search")
    parser.add_argument("--chunks", type=int, nargs="+", help="store sizes (100000 1000000)")
    parser.add_argument(
        "--large-stores",
        nargs="+",
        choices=STORES,
        default=[DISTINCT],
        help="the stores measured at a million chunks or more (both below)",
    )
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".ragline/bench-cache"))
    parser.add_argument(
        "--tiny", action="store_true", help="2,000 chunks, few requests: the run `make test` does"
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only embed the real chunks into the vector cache (the first run's long part)",
    )
    parser.add_argument(
        "--user-form",
        action="store_true",
        help="measure people's permission-filtered search instead (100,000 chunks)",
    )
    parser.add_argument(
        "--store-process",
        action="store_true",
        help="measure each store again served by a process of its own (uncached c1 and c32)",
    )
    add_results_option(parser)
    args = parser.parse_args()
    scale = TINY if args.tiny else Scale()
    if args.chunks:
        scale = dataclasses.replace(scale, chunks=tuple(args.chunks))
    # One export of the query model to ONNX for this run's API processes (each store has a run
    # directory of its own) and the next runs, unless one is set already.
    os.environ.setdefault(ONNX_DIR, str((args.cache_dir / "onnx").resolve()))
    announce({**LOAD_SETTINGS, ONNX_DIR: os.environ[ONNX_DIR]})
    # Enough distinct questions for every uncached request: each store asks the same ones.
    needed = 10 * scale.requests + 10 * max(scale.mcp_rounds, scale.user_rounds + 1)
    material = load_material(args.eval, scale, needed)
    encoder = build_embedder(encoder_settings())
    encoder_queries = material.questions[: scale.encoder_queries]
    result: dict[str, Any] = {}
    encoder_runs = [] if args.user_form else [time_encoder(encoder, encoder_queries)]
    # Keyed by the model the API's embedder names (the document model is the same one).
    embed_material(material, VectorCache(args.cache_dir, encoder.model_id))
    if args.prepare:
        print(json.dumps({"real_chunks": len(material.real), "sources": material.sources}))
        return
    with (
        tempfile.TemporaryDirectory(prefix="ragline-search-") as tmp,
        LocalServices.on_free_ports(Path(tmp) / "services") as services,
    ):
        run = Run(services, Path(tmp), material, encoder, scale, args.cache_dir, args.store_process)
        if args.user_form:
            user_figures = measure_user_size(run, scale.chunks[0])
            print(json.dumps(user_figures))
            publish("search-user-form", user_figures, tiny=args.tiny, results_dir=args.results_dir)
            return
        stores: dict[str, list[str]] = {}
        for chunks in scale.chunks:
            stores[str(chunks)] = stores_at(chunks, args.large_stores)
            for store_kind in stores[str(chunks)]:
                figures = measure_store(run, store_kind, chunks)
                end = suffix(store_kind, chunks)
                result.update({f"{key}{end}": value for key, value in figures.items()})
    encoder_runs.append(time_encoder(encoder, encoder_queries))
    result |= {
        key: round(statistics.mean(figures[key] for figures in encoder_runs), 2)
        for key in encoder_runs[0]
    }
    for size, kinds in stores.items():
        for store_kind in kinds:
            end = suffix(store_kind, int(size))
            result[f"ratio_uncached_c32_to_encoder{end}"] = round(
                result[f"rps_uncached_c32{end}"] / result["encoder_qps_batch32"], 3
            )
    result["chunks"] = list(scale.chunks)
    result["stores"] = stores
    result["sources"] = material.sources
    result["goals"] = judge(result, GOALS)
    print()
    print_goals(result["goals"])
    print(json.dumps(result))
    publish("search", result, tiny=args.tiny, results_dir=args.results_dir)


if __name__ == "__main__":
    main()

"""Search latency and throughput over 100,000 and 1,000,000 chunks, through the real endpoint.

For each size, fills a fresh local default's vector store with that many chunks (the man-page
benchmark's chunks, each repeated under many documents with its real embedding slightly
perturbed, so the store holds realistic text and vectors), builds its index, then starts the
API and times a bot's search (hybrid, the default) at concurrency 1, 8 and 32:

- uncached: every request a query never asked before (query embedding included);
- cached: the same query again (the answer comes from the cache).

    .venv/bin/python -m benchmarks.search [--chunks 100000 1000000]

The last line printed is one JSON object: `p95_ms_uncached_c1`, `p95_ms_cached_c1`,
`rps_uncached_c32`, `rps_cached_c32`, ... for 100,000 chunks, the same keys with `_1m` for
1,000,000, the API process's peak memory (`api_peak_rss_mb`) and the store's size on disk
(`store_disk_mb`). The load generator is a lean asyncio HTTP/1.1 client in this process, on
the same two cores as the server.

The bot benchmark's chunks are readable by `["role:admin", "tenant"]`, so the bot (which reads
`tenant`) and admins see all of them.

`--user-form` measures people's permission-filtered search instead, on a store of its own
(100,000 chunks in 10 KBs) where the user `u-bench` may read exactly 10% of the chunks: chunk
n has readers `["role:admin", "user:u-bench"]` when n % 20 == 0 (5%), `["role:admin",
"audience:bench-crew"]` (an audience whose only member is u-bench) when n % 20 == 10 (5%), and
otherwise `["role:admin", "user:owner-<n % 50>"]`, private to one of 50 other users (90%). No
chunk is readable by `tenant`. The user's token and audience are made in-process before the
API starts. Side by side in one run, uncached, concurrency 1, in alternating rounds of fresh
queries (150 each): the user's search (`POST /api/v1/knowledge/search`, dense and hybrid, top
10) and the unfiltered search (the tenant form over the same KBs, as an admin, which reads
everything: a bot reading `tenant` would find nothing here). Every passage the user gets must
be readable by them, or the run fails. And the recall@10 of the filtered dense query against
an exact filtered brute-force search over the same vectors (numpy, over the chunks u-bench may
read), for 200 queries, measured in-process on the store before the API starts. New keys:
`p50_ms_user_dense_c1`, `p95_ms_user_dense_c1`, `p95_ms_user_hybrid_c1`,
`p95_ms_unfiltered_dense_c1`, `p95_ms_unfiltered_hybrid_c1`, ...,
`recall_at_10_user_filtered` and `user_readable_share` (counted from what was written).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb
from core.filters import SearchScope
from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env
from infra.embedding.base import Embedder
from infra.mongo import ensure_indexes
from infra.settings import Settings
from infra.sparse import SparseEncoder
from infra.vectorstore.base import ChunkPoint, RetrievalMode, VectorQuery, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from ragline.system import System
from schemas.chunks import ChunkPayload
from schemas.domain import ChunkRecord, Record, Role, chunk_id, chunk_point_id
from workers.chunk.chunking import chunk_document
from workers.chunk.context import with_generic_context
from workers.extract.extractors import extract

KBS = 10
ATTACHED = 3
LEVELS = (1, 8, 32)
# The user form's reader, the audience they are in, and how many other owners there are.
USER, AUDIENCE, OWNERS = "u-bench", "bench-crew", 50
USER_PRINCIPALS = ("tenant", f"user:{USER}", f"audience:{AUDIENCE}")
USER_PRINCIPALS_SET = frozenset(USER_PRINCIPALS)
# How many queries the filtered recall@10 is measured with.
RECALL_QUERIES = 200


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


def base_chunks(corpus: dict[str, str]) -> list[ChunkRecord]:
    """The man pages, chunked and given their context prefix as the pipeline does."""
    chunks: list[ChunkRecord] = []
    for text in corpus.values():
        document = extract(Record(content=text).as_markdown().encode(), "page.md")
        chunks.extend(with_generic_context(document.title, chunk_document(document)[0]))
    return chunks


async def fill_store(
    settings: Settings,
    total: int,
    corpus: dict[str, str],
    readers_of: Callable[[int], list[str]] = everyone,
    recall_queries: list[str] | None = None,
) -> tuple[list[str], Written, float | None]:
    """Creates the KBs and writes `total` chunks across them (the API is not running yet: this
    process owns the store), then builds the HNSW index; returns the KB ids, what was written,
    and with `recall_queries` the filtered search's recall@10 for the bench user."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        await ensure_indexes(system.db)
        store = await system.open_vector_store()
        embedder = await system.open_embedder()
        kbs = system.knowledge_bases
        kb_ids = [(await kbs.create("default", f"KB {n}")).id for n in range(KBS)]
        written = await write_chunks(store, embedder, kb_ids, total, corpus, readers_of)
        if isinstance(store, EdgeVectorStore):
            started = time.time()
            await store.optimize()
            print(f"built the HNSW index in {time.time() - started:.0f} s")
        recall = None
        if recall_queries:
            recall = await filtered_recall(store, embedder, kb_ids, written, recall_queries)
    return kb_ids, written, recall


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
    scope = SearchScope("default", tuple(kb_ids), USER_PRINCIPALS)
    recalls = []
    for vector in embedder.embed_queries(queries):
        exact = candidates[np.argsort(-(written.vectors[candidates] @ vector))[:10]]
        wanted = {written.point_ids[i] for i in exact}
        found = await store.search(VectorQuery(scope, vector, 10, mode=RetrievalMode.DENSE))
        recalls.append(len(wanted & {hit.point_id for hit in found}) / len(wanted))
    print(
        f"filtered dense search, {len(queries)} queries over the {len(candidates)} chunks "
        f"({len(candidates) / len(readable):.0%}) the user may read: recall@10 "
        f"{statistics.mean(recalls):.4f} (min {min(recalls):.2f})"
    )
    return statistics.mean(recalls)


# The load this benchmark makes: one bot asking up to 32 searches at once, far above the
# service's default per-bot rate (which would answer 429).
LOAD_SETTINGS = {"RAGLINE_LIMITS__SEARCHES_PER_SECOND": "1000000"}


@dataclass
class Written:
    """What was written, kept for an exact search: point ids, unit vectors, readers."""

    point_ids: list[str]
    vectors: NDArray[np.float32]
    readers: list[list[str]]
    document_ids: list[str]

    def readable(self) -> NDArray[np.bool_]:
        """Which chunks the bench user may read."""
        return np.array([not USER_PRINCIPALS_SET.isdisjoint(r) for r in self.readers])


async def write_chunks(
    store: VectorStore,
    embedder: Embedder,
    kb_ids: list[str],
    total: int,
    corpus: dict[str, str],
    readers_of: Callable[[int], list[str]] = everyone,
) -> Written:
    """Writes `total` chunks across the KBs: the corpus's chunks, again and again, each copy's
    vector moved a little, readable by `readers_of(n)`."""
    chunks = base_chunks(corpus)
    texts = [chunk.text for chunk in chunks]
    embedded = [chunk.embedding_text for chunk in chunks]
    started = time.time()
    vectors = embedder.embed_documents(embedded)
    print(f"embedded {len(texts)} distinct chunks in {time.time() - started:.0f} s")
    encoder = SparseEncoder()
    sparse = [encoder.document(text) for text in embedded]
    rng = np.random.default_rng(7)
    started = time.time()
    batch: list[ChunkPoint] = []
    written = Written([], np.zeros((total, vectors.shape[1]), dtype=np.float32), [], [])
    for n in range(total):
        base = n % len(texts)
        document_id = f"doc_bench{n // len(texts):03d}{base:05d}"
        noisy = vectors[base] + rng.normal(scale=0.02, size=384).astype(np.float32)
        written.vectors[n] = noisy / np.linalg.norm(noisy)
        written.point_ids.append(chunk_point_id(document_id, 0))
        written.readers.append(readers_of(n))
        written.document_ids.append(document_id)
        batch.append(
            ChunkPoint(
                point_id=written.point_ids[-1],
                dense=written.vectors[n],
                sparse=sparse[base],
                payload=ChunkPayload(
                    tenant_id="default",
                    kb_id=kb_ids[n % len(kb_ids)],
                    document_id=document_id,
                    chunk_id=chunk_id(document_id, 0),
                    chunk_index=0,
                    chunk_text=texts[base],
                    context=chunks[base].context,
                    active=True,
                    readers=written.readers[-1],
                    source_name=f"{document_id}.md",
                    document_title=document_id,
                    page=None,
                    heading_path=[],
                    start=0,
                    end=len(texts[base]),
                    source_key=f"file:{document_id}.md",
                    version=1,
                    url=None,
                ),
            )
        )
        if len(batch) == 1000:
            await store.upsert(batch)
            batch = []
    await store.upsert(batch)
    print(f"wrote {total} chunks in {time.time() - started:.0f} s")
    return written


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
    port: int,
    form: Form,
    queries: list[str],
    concurrency: int,
    breakdown: list[dict[str, Any]] | None = None,
    answers: list[dict[str, Any]] | None = None,
) -> tuple[list[float], float]:
    """Sends the queries with `concurrency` connections; returns latencies (ms) and rps.

    With `breakdown`, collects the answers' own timings (their `metrics` blocks); with
    `answers`, the whole answers.
    """
    pending = list(enumerate(queries))
    latencies: list[float] = []

    async def worker() -> None:
        connection = Connection("127.0.0.1", port)
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

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, len(queries) / (time.perf_counter() - started)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated."""
    return float(np.percentile(values, q))


async def measure(port: int, bot_id: str, questions: list[str]) -> dict[str, Any]:
    """Every concurrency level, uncached then cached."""
    figures: dict[str, Any] = {}
    fresh = iter(questions)
    form = bot_form(bot_id)
    for level in LEVELS:
        count = 200 if level == 1 else 400
        uncached = [next(fresh) for _ in range(count)]
        breakdown: list[dict[str, Any]] = []
        latencies, rps = await load(port, form, uncached, level, breakdown)
        figures[f"uncached_c{level}"] = (latencies, rps)
        if level == 1:
            parts = {
                part: round(statistics.mean(m[part] for m in breakdown), 2)
                for part in ("embedding_ms", "vector_search_ms", "total_ms")
            }
            print(f"uncached c1, server side, mean: {parts}")
        hot = questions[-1]
        await load(port, form, [hot], 1)  # the answer is now cached
        latencies, rps = await load(port, form, [hot] * count * 2, level)
        figures[f"cached_c{level}"] = (latencies, rps)
    return summarise(figures)


async def measure_mcp(port: int, bot_id: str, token: str, questions: list[str]) -> dict[str, Any]:
    """The same bot's search through the HTTP contract and through MCP `knowledge_search`,
    uncached, concurrency 1, in alternating rounds of fresh queries: what MCP adds."""
    forms = {"contract": bot_form(bot_id), "mcp": mcp_form(token)}
    fresh = iter(reversed(questions))  # queries `measure` did not ask
    timings: dict[str, list[float]] = {name: [] for name in forms}
    spent: dict[str, float] = dict.fromkeys(forms, 0.0)
    for _ in range(60):
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


def suffix(chunks: int) -> str:
    """The JSON keys' suffix of a store size: none for 100,000 (the reference), else `_1m`..."""
    if chunks == 100_000:
        return ""
    if chunks % 1_000_000 == 0:
        return f"_{chunks // 1_000_000}m"
    return f"_{chunks // 1000}k"


def directory_mb(path: Path) -> float:
    """Bytes under a directory, in MB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def measure_size(chunks: int, data: dict[str, Any], questions: list[str]) -> dict[str, Any]:
    """One store size: fill, start the API, time the searches."""
    with tempfile.TemporaryDirectory(prefix="ragline-search-") as tmp:
        work = Path(tmp)
        with LocalServices.on_free_ports(work / "services") as services:
            env = {
                **pipeline_env(services, work / "run", TOKEN, SECRET),
                "RAGLINE_LOG_LEVEL": "WARNING",
                **LOAD_SETTINGS,
            }
            # The settings the API will read, so the store is filled where it looks.
            os.environ.update(env)
            kb_ids, _, _ = asyncio.run(fill_store(Settings(), chunks, data["corpus"]))
            port = free_port()
            pipeline = Pipeline(work / "run", env, api_port=port)
            try:
                pipeline.start(workers=False)
                with httpx.Client(
                    base_url=pipeline.api_url, headers={"Authorization": f"Bearer {TOKEN}"}
                ) as http:
                    knowledge = {"enabled": True, "kb_ids": kb_ids[:ATTACHED]}
                    bot = http.post("/api/v1/bots", json={"name": "bench", "knowledge": knowledge})
                    bot.raise_for_status()
                    bot_id = bot.json()["id"]
                    issued = http.post(f"/api/v1/bots/{bot_id}/tokens", json={"name": "bench"})
                    issued.raise_for_status()
                    bot_token = issued.json()["token"]
                print(
                    f"store: {chunks} chunks in {KBS} KBs; the bot searches {ATTACHED} of "
                    f"them (about {chunks * ATTACHED // KBS} chunks), hybrid, top 4"
                )
                result = asyncio.run(measure(port, bot_id, questions))
                if chunks == 100_000:
                    result |= asyncio.run(measure_mcp(port, bot_id, bot_token, questions))
                api = next(p for p in pipeline.processes if p.name == "api")
                result["api_peak_rss_mb"] = round(peak_rss_mb(api.pid), 1)
                result["store_disk_mb"] = round(directory_mb(work / "run" / "vectors"), 1)
                print(
                    f"API process peak RSS {result['api_peak_rss_mb']} MB, "
                    f"store {result['store_disk_mb']} MB on disk"
                )
            finally:
                pipeline.stop()
    return result


async def add_bench_user(settings: Settings) -> str:
    """The bench user's token, and their audience."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        _, token = await system.token_service.issue("default", "bench", Role.USER, USER)
        await system.people.put_audience("default", AUDIENCE, "the bench user's audience")
        await system.people.set_members("default", AUDIENCE, [USER])
        return token


async def measure_user_form(
    port: int, token: str, kb_ids: list[str], questions: list[str], readable: frozenset[str]
) -> dict[str, Any]:
    """Uncached searches at concurrency 1: the user's (dense, hybrid) beside the unfiltered
    tenant form's over the same KBs. The user's answers must hold only documents in `readable`
    (the benchmark's documents are titled by their ids); short answers are counted."""
    user = {"Authorization": f"Bearer {token}"}
    forms = {
        "user_dense": Form(
            "/api/v1/knowledge/search", user, {"top_k": 10, "retrieval_mode": "dense"}
        ),
        "user_hybrid": Form(
            "/api/v1/knowledge/search", user, {"top_k": 10, "retrieval_mode": "hybrid"}
        ),
        "unfiltered_dense": Form(
            "/api/v1/internal/knowledge/search",
            {"X-Internal-Secret": SECRET},
            {"tenant_id": "default", "kb_ids": kb_ids, "top_k": 10, "retrieval_mode": "dense"},
        ),
        "unfiltered_hybrid": Form(
            "/api/v1/internal/knowledge/search",
            {"X-Internal-Secret": SECRET},
            {"tenant_id": "default", "kb_ids": kb_ids, "top_k": 10, "retrieval_mode": "hybrid"},
        ),
    }
    fresh = iter(questions)
    for form in forms.values():  # warm-up, on queries of its own
        await load(port, form, [next(fresh) for _ in range(5)], 1)
    # Alternating rounds of 5 queries never asked before, 150 per form: drift hits all alike.
    timings: dict[str, list[float]] = {name: [] for name in forms}
    spent: dict[str, float] = dict.fromkeys(forms, 0.0)
    answers: dict[str, list[dict[str, Any]]] = {name: [] for name in forms}
    for _ in range(30):
        for name, form in forms.items():
            batch = [next(fresh) for _ in range(5)]
            latencies, rps = await load(port, form, batch, 1, None, answers[name])
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
    return summarise(figures)


def measure_user_size(chunks: int, data: dict[str, Any], questions: list[str]) -> dict[str, Any]:
    """The user form: fill with one chunk in ten readable by the bench user, measure the
    filtered recall in-process, then start the API and time both forms."""
    with tempfile.TemporaryDirectory(prefix="ragline-search-") as tmp:
        work = Path(tmp)
        with LocalServices.on_free_ports(work / "services") as services:
            env = {
                **pipeline_env(services, work / "run", TOKEN, SECRET),
                "RAGLINE_LOG_LEVEL": "WARNING",
                **LOAD_SETTINGS,
            }
            os.environ.update(env)
            settings = Settings()
            recall_queries = questions[-RECALL_QUERIES:]
            kb_ids, written, recall = asyncio.run(
                fill_store(settings, chunks, data["corpus"], one_in_ten, recall_queries)
            )
            mask = written.readable()
            share = float(mask.mean())
            readable = frozenset(d for d, ok in zip(written.document_ids, mask, strict=True) if ok)
            del written, mask  # the vectors are no longer needed
            token = asyncio.run(add_bench_user(settings))
            port = free_port()
            pipeline = Pipeline(work / "run", env, api_port=port)
            try:
                pipeline.start(workers=False)
                print(
                    f"store: {chunks} chunks in {KBS} KBs; the user may read one in ten; "
                    "top 10, uncached, concurrency 1"
                )
                result = asyncio.run(measure_user_form(port, token, kb_ids, questions, readable))
            finally:
                pipeline.stop()
    result["recall_at_10_user_filtered"] = round(recall or 0.0, 4)
    result["user_readable_share"] = round(share, 4)
    return result


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search")
    parser.add_argument("--chunks", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument(
        "--user-form",
        action="store_true",
        help="measure people's permission-filtered search instead (100,000 chunks)",
    )
    args = parser.parse_args()
    data = json.loads(args.eval.read_text())
    questions = list(data["queries"].values())
    print(f"stack settings: {LOAD_SETTINGS}")
    # Enough distinct questions for every uncached request.
    questions = [f"{q} ({n})" if n else q for n in range(3) for q in questions]
    if args.user_form:
        print(json.dumps(measure_user_size(100_000, data, questions)))
        return
    result: dict[str, Any] = {}
    for chunks in args.chunks:
        figures = measure_size(chunks, data, questions)
        result.update({f"{key}{suffix(chunks)}": value for key, value in figures.items()})
    result["chunks"] = args.chunks
    print(json.dumps(result))


if __name__ == "__main__":
    main()

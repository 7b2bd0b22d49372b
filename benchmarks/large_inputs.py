"""Memory on large inputs: peak RSS of every process while a long file is ingested.

Ingests, each through a fresh local stack, a 30- and a 300-page PDF and a 10,000- and a
100,000-row CSV, and prints each process's peak resident memory (VmHWM) and the time to
index. Memory that stays flat while the input grows tenfold is bounded.

    .venv/bin/python -m benchmarks.large_inputs

The last line printed is one JSON object.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ingest import SECRET, TOKEN, peak_rss_mb, wait_all_indexed
from devstack.launcher import isolated_stack
from tests.factories import long_pdf, stock_csv

INPUTS: dict[str, tuple[str, Callable[[], bytes]]] = {
    "pdf_30_pages": ("model.pdf", lambda: long_pdf(30)),
    "pdf_300_pages": ("model.pdf", lambda: long_pdf(300)),
    "csv_10k_rows": ("stock.csv", lambda: stock_csv(10_000)),
    "csv_100k_rows": ("stock.csv", lambda: stock_csv(100_000)),
}


def ingest_one(filename: str, data: bytes, work_dir: Path) -> dict[str, Any]:
    """Ingests one file through a fresh stack; returns its figures."""
    with isolated_stack(work_dir, TOKEN, SECRET) as (_, pipeline):
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
    results: dict[str, Any] = {}
    for label, (filename, build) in INPUTS.items():
        data = build()
        with tempfile.TemporaryDirectory(prefix="ragline-large-") as tmp:
            results[label] = ingest_one(filename, data, Path(tmp))
        print(f"{label}: {results[label]}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""Crawl throughput: pages per second of a crawl of a local site (fetch, extract, chunk, embed,
index), beside the embedding model alone on the same pages' chunks, in one run.

Starts its own local stack and the test site (`tests/crawl_site.py`) with `--pages` extra pages
of a few paragraphs each, reachable from a hub page; crawls it from `/docs/` and the hub
(`--hub-only`: the hub alone, the extra pages without the test site's own) and measures from
the job's start to its last page indexed. Then crawls it again unchanged (every page answers
304, or the same content: nothing is embedded) and reports that rate too. Finally it embeds the
very same chunks with the same model and batch size in this process
(`benchmarks.ingest.model_alone`). The stack runs the API with the relay, crawl, extract, chunk
and embed workers (`benchmarks/stack.py`); the settings it overrides (private addresses
allowed, no per-host delay) are printed. The last line printed is one JSON object: `pages`,
`chunks`, `crawl_seconds`, `pages_per_s`, `chunks_per_s`, `recrawl_seconds`,
`recrawl_pages_per_s`, `recrawl_counts`, `model_alone_chunks`, `model_alone_chunks_per_s`,
`model_alone_pages_per_s`, `ratio` (the crawl's chunks/s over the model's), `first_counts` and
`chunks_in_store` (the chunks of the crawled pages the vector store holds at the end).

    .venv/bin/python -m benchmarks.crawl [--pages 300] [--hub-only]
    .venv/bin/python -m benchmarks.crawl --tiny     # the hub alone, 5 pages (`make test`)

The tiny run's stack embeds with the hashed embedder, and so does its "model alone" (it checks
the mechanics, not the model: the worker's model load and a second one here were most of its
CPU).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ingest import SECRET, TOKEN, chunk_texts, model_alone, wait_all_indexed
from benchmarks.results import add_results_option, exit_if_data_was_lost, publish
from benchmarks.stack import CRAWL_STAGES, announce, bench_stack, points_held, run_settings
from infra.embedding.hashed import HashedEmbedder
from infra.settings.embedding import EmbeddingSettings
from tests.crawl_site import CrawlSite

TINY_PAGES = 5
# The test site is on 127.0.0.1 and answers at once: no delay between its pages.
STACK_SETTINGS = {
    "RAGLINE_CRAWL__ALLOW_PRIVATE_NETWORKS": "true",
    "RAGLINE_CRAWL__PER_HOST_DELAY_S": "0",
    "RAGLINE_CRAWL__FETCH_TIMEOUT_S": "1",
}
WORDS = (
    "valve pump filter gasket torque sensor relay breaker conveyor spindle bearing coupling "
    "hydraulic pneumatic lubricant calibration tolerance inspection maintenance schedule"
).split()


def extra_page(number: int) -> str:
    """A page of five paragraphs that no other page shares."""
    paragraphs = []
    for p in range(5):
        words = [WORDS[(number * 7 + p * 3 + k) % len(WORDS)] for k in range(60)]
        paragraphs.append(f"<p>Unit {number}-{p}: {' '.join(words)}.</p>")
    return (
        f"<html><head><title>Unit {number}</title></head><body><main><h1>Unit {number}</h1>"
        f"{''.join(paragraphs)}</main></body></html>"
    )


def crawl(http: httpx.Client, kb: str, urls: list[str]) -> dict[str, Any]:
    """Runs one crawl job to its end; returns the job and its seconds to the last page
    indexed."""
    started = time.time()
    response = http.post(
        f"/api/v1/knowledge-bases/{kb}/crawl-jobs",
        json={"urls": urls, "max_pages": 10_000, "max_depth": 5},
    )
    response.raise_for_status()
    job_id = response.json()["job_id"]
    while (job := http.get(f"/api/v1/crawl-jobs/{job_id}").json())["state"] not in (
        "completed", "failed", "cancelled",
    ):  # fmt: skip
        time.sleep(0.2)
    items = http.get(f"/api/v1/knowledge-bases/{kb}/documents", params={"limit": 200}).json()
    ids = [d["id"] for d in items["items"]]
    while cursor := items.get("next_cursor"):
        items = http.get(
            f"/api/v1/knowledge-bases/{kb}/documents", params={"limit": 200, "cursor": cursor}
        ).json()
        ids += [d["id"] for d in items["items"]]
    documents = wait_all_indexed(http, kb, ids)
    return {"job": job, "seconds": time.time() - started, "documents": documents}


def main() -> None:
    """Runs the benchmark and prints its figures."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crawl")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"from the hub alone, {TINY_PAGES} pages: the run `make test` does",
    )
    parser.add_argument(
        "--hub-only", action="store_true", help="crawl from the hub alone, not from /docs/ too"
    )
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        args.pages, args.hub_only = TINY_PAGES, True
    settings = run_settings(STACK_SETTINGS, tiny=args.tiny)
    announce(settings)
    with tempfile.TemporaryDirectory() as tmp, CrawlSite(slow_seconds=2.0) as site:
        hub = "".join(f'<a href="/docs/unit-{n}">unit {n}</a> ' for n in range(args.pages))
        site.set_page("/docs/hub", f"<html><body><main>{hub}</main></body></html>")
        for n in range(args.pages):
            site.set_page(f"/docs/unit-{n}", extra_page(n))
        work = Path(tmp)
        stack = bench_stack(work / "stack", TOKEN, SECRET, settings, CRAWL_STAGES)
        with stack as (_, pipeline):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=pipeline.api_url, headers=headers, timeout=60) as http:
                kb = http.post("/api/v1/knowledge-bases", json={"name": "crawl"}).json()["id"]
                urls = [site.url("/docs/hub")]
                if not args.hub_only:
                    urls.insert(0, site.url("/docs/"))
                first = crawl(http, kb, urls)
                second = crawl(http, kb, urls)
                held = points_held(http, kb, first["documents"])
        documents = first["documents"]
        pages = len(documents)
        chunks = sum(int(d["chunk_count"]) for d in documents)
        # The same pages' chunks, made here, through the model alone.
        copies = work / "pages"
        copies.mkdir()
        paths = []
        for n, document in enumerate(documents):
            body = httpx.get(document["url"]).content
            suffix = ".pdf" if document["url"].endswith(".pdf") else ".html"
            path = copies / f"page-{n}{suffix}"
            path.write_bytes(body)
            paths.append(path)
        texts = chunk_texts(paths)
        model_seconds = model_alone(
            texts, EmbeddingSettings(), HashedEmbedder(EmbeddingSettings()) if args.tiny else None
        )
    result = {
        "pages": pages,
        "chunks": chunks,
        "crawl_seconds": round(first["seconds"], 2),
        "pages_per_s": round(pages / first["seconds"], 2),
        "chunks_per_s": round(chunks / first["seconds"], 2),
        "recrawl_seconds": round(second["seconds"], 2),
        "recrawl_pages_per_s": round(pages / second["seconds"], 2),
        "recrawl_counts": second["job"]["counts"],
        "model_alone_chunks": len(texts),
        "model_alone_chunks_per_s": round(len(texts) / model_seconds, 2),
        "model_alone_pages_per_s": round(pages / model_seconds, 2),
        "ratio": round((chunks / first["seconds"]) / (len(texts) / model_seconds), 3),
        "first_counts": first["job"]["counts"],
        "chunks_in_store": held,
    }
    print(
        f"crawl: {pages} pages ({chunks} chunks) in {first['seconds']:.1f} s = "
        f"{result['pages_per_s']} pages/s; re-crawl unchanged {second['seconds']:.1f} s; "
        f"model alone {result['model_alone_chunks_per_s']} chunks/s"
    )
    print(json.dumps(result))
    publish("crawl", result, tiny=args.tiny, results_dir=args.results_dir)
    # Every chunk the crawled pages make is indexed, once, and is in the store.
    problems = [] if chunks == len(texts) else [f"{chunks} chunks indexed, {len(texts)} made"]
    if held != chunks:
        problems.append(f"{held} chunks in the store, {chunks} indexed")
    exit_if_data_was_lost("crawl", problems)


if __name__ == "__main__":
    main()

"""Retrieval quality: nDCG@10 and recall@10 of dense, sparse and hybrid search.

Loads `../shared/eval/manpages.json` (1,481 man pages, 800 queries with one relevant page each)
through the real ingestion path (the batch endpoint, Kafka, the stage workers) into a fresh
local stack, asks every query through the real search endpoint in each retrieval mode, and
scores the rankings with trec_eval's measures (pytrec-eval). Pages are ranked by their best
passage.

    .venv/bin/python -m benchmarks.quality [--eval ../shared/eval/manpages.json]

The last line printed is one JSON object with `ndcg10_dense`, `ndcg10_sparse` and
`ndcg10_hybrid` (and the recalls).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytrec_eval

from benchmarks.ingest import SECRET, TOKEN
from infra.local_stack import isolated_stack

MODES = ("dense", "sparse", "hybrid")
BATCH = 500
IN_PROGRESS = ("queued", "extracting", "chunking", "embedding", "indexing")


def ingest(http: httpx.Client, kb: str, corpus: dict[str, str]) -> dict[str, str]:
    """Upserts the corpus as records; returns document id -> page id once all are indexed."""
    pages: dict[str, str] = {}
    items = list(corpus.items())
    for start in range(0, len(items), BATCH):
        records = [
            {"external_id": page, "content": text} for page, text in items[start : start + BATCH]
        ]
        response = http.post(
            f"/api/v1/knowledge-bases/{kb}/documents/batch", json={"records": records}, timeout=300
        )
        response.raise_for_status()
        for result in response.json()["results"]:
            pages[result["document_id"]] = result["external_id"]
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        busy = sum(
            len(
                http.get(
                    f"/api/v1/knowledge-bases/{kb}/documents",
                    params={"status": status, "limit": 1},
                ).json()["items"]
            )
            for status in IN_PROGRESS
        )
        if not busy:
            failed = http.get(
                f"/api/v1/knowledge-bases/{kb}/documents", params={"status": "failed"}
            ).json()["items"]
            if failed:
                raise RuntimeError(f"{len(failed)} pages failed: {failed[0]['parse_error']}")
            return pages
        time.sleep(2)
    raise TimeoutError("the corpus was not indexed within an hour")


def rank(
    search: httpx.Client, kb: str, query: str, mode: str, pages: dict[str, str]
) -> dict[str, float]:
    """The pages a search returns, best first, as trec_eval scores."""
    response = search.post(
        "/api/v1/internal/knowledge/search",
        json={
            "tenant_id": "default",
            "kb_ids": [kb],
            "query": query,
            "top_k": 20,
            "retrieval_mode": mode,
            "score_threshold": 0.0,
        },
    )
    response.raise_for_status()
    ranked: list[str] = []
    for hit in response.json()["hits"]:
        page = pages.get(hit["document_id"])
        if page is not None and page not in ranked:
            ranked.append(page)
    return {page: float(len(ranked) - position) for position, page in enumerate(ranked[:10])}


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality")
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    args = parser.parse_args()
    data = json.loads(args.eval.read_text())
    corpus: dict[str, str] = data["corpus"]
    queries: dict[str, str] = data["queries"]
    qrels: dict[str, dict[str, int]] = data["qrels"]
    print(f"corpus: {len(corpus)} pages, {len(queries)} queries")

    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="ragline-quality-") as tmp,
        isolated_stack(Path(tmp), TOKEN, SECRET) as (_, pipeline),
    ):
        admin = httpx.Client(
            base_url=pipeline.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
        search = httpx.Client(
            base_url=pipeline.api_url, headers={"X-Internal-Secret": SECRET}, timeout=60
        )
        kb = admin.post("/api/v1/knowledge-bases", json={"name": "man pages"}).json()["id"]
        started = time.time()
        pages = ingest(admin, kb, corpus)
        print(f"ingested in {time.time() - started:.0f} s")
        for mode in MODES:
            started = time.time()
            run = {qid: rank(search, kb, text, mode, pages) for qid, text in queries.items()}
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"})
            scores = evaluator.evaluate(run)
            ndcg = sum(s["ndcg_cut_10"] for s in scores.values()) / len(queries)
            recall = sum(s["recall_10"] for s in scores.values()) / len(queries)
            results[f"ndcg10_{mode}"] = round(ndcg, 4)
            results[f"recall10_{mode}"] = round(recall, 4)
            took = (time.time() - started) / len(queries) * 1000
            print(f"{mode}: nDCG@10 {ndcg:.4f}, recall@10 {recall:.4f} ({took:.0f} ms/query)")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

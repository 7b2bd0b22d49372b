"""The embedded vector store alone, churned at a constant number of live documents as a busy
KB churns it: whether its memory follows the documents it holds or the documents it has seen.
The store optimised as it is in service, and never optimised, side by side in one run.

    .venv/bin/python -m benchmarks.store_churn [--live 800] [--rounds 6000] [--searches 1]
                                               [--searchers 0] [--optimize-every 50] [--every 250]

Each round writes a new document's chunks (150 words, and a reference code no other document
has, so that every document brings sparse terms never seen before) and publishes it, runs
`--searches` hybrid searches (a random document's code and four words: dense, sparse and probe
queries) and reads their best chunks (`--searchers` more search throughout, beside the
writes, as the API's searches do), then deletes the oldest document, so that `--live`
documents stay live. In service the store optimises once writes pause and at least every two
minutes while they never do (`EdgeVectorStore`); here the optimised mode calls `optimize()`
every `--optimize-every` rounds, the other never does. Each mode runs in a process of its own
(malloc's figures are per process) and prints, every `--every` rounds, malloc's memory in use
(`mallinfo2`, after handing free pages back), the private memory and Python's live blocks.
The last line printed is one JSON object: per mode, the band (least, most) of malloc's memory
in use and of the private memory in each half of the samples taken once the live documents
have turned over twice, and how far each band's top moved (`figures`). What runs showed:
docs/benchmarks/soak.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

MODES = ("optimised", "never")
WORDS = [f"w{i}" for i in range(5000)]
CHUNKS = 3
DIMENSIONS = 384


async def churn(args: argparse.Namespace, optimised: bool) -> list[dict[str, float]]:
    """Runs the rounds on a fresh store in this process; one sample every `args.every`."""
    from benchmarks.memory import process_tree_rss_mb
    from core.copies import copy_signature
    from core.filters import SearchScope, chunks_of_document
    from core.retrieval import RetrievalMode
    from core.sparse import SparseEncoder, identifier_terms, packed_terms, term_index
    from infra.process.malloc import malloc_info, release_free_memory
    from infra.vectorstore.base import ChunkPoint, PublishedDocument, RankQuery
    from infra.vectorstore.edge import EdgeVectorStore
    from schemas.chunks import ChunkPayload
    from schemas.domain import chunk_point_id

    rng = random.Random(args.seed)
    encoder = SparseEncoder()
    readers = ("member",)
    scope = SearchScope("t1", ("kb1",), readers)

    def unit() -> NDArray[np.float32]:
        vector = np.asarray([rng.gauss(0, 1) for _ in range(DIMENSIONS)], dtype=np.float32)
        return vector / np.float32(np.linalg.norm(vector))

    def points(doc: int) -> list[ChunkPoint]:
        made = []
        for index in range(CHUNKS):
            text = " ".join([f"REF-{doc:06d}-{index}", *rng.choices(WORDS, k=150)])
            payload = ChunkPayload(
                tenant_id="t1", kb_id="kb1", document_id=f"doc{doc}", chunk_index=index,
                chunk_text=text, active=False, readers=list(readers), source_key=f"file:{doc}",
                version=1, terms=packed_terms(text), copy_signature=copy_signature(text),
            )  # fmt: skip
            dense = unit()
            made.append(
                ChunkPoint(
                    chunk_point_id(f"doc{doc}", index), dense, payload, encoder.document(text)
                )
            )
        return made

    async def search(store: EdgeVectorStore, newest: int) -> None:
        """A hybrid search for a random document's code and four words; its best chunks read."""
        text = f"REF-{rng.randrange(newest + 1):06d}-0 " + " ".join(rng.choices(WORDS, k=4))
        probes = tuple(term_index(term) for term in identifier_terms(text))
        query = RankQuery(
            scope, unit(), 40, RetrievalMode.HYBRID,
            sparse=encoder.query(text), probes=probes, probe_limit=50,
        )  # fmt: skip
        rankings = await store.rank(query)
        await store.read(scope, [point for point, _ in rankings.dense[:10]])

    async def searcher(store: EdgeVectorStore, newest: list[int], stop: asyncio.Event) -> None:
        """Searches beside the writes until stopped."""
        while not stop.is_set():
            await search(store, newest[0])
            await asyncio.sleep(0)

    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        # The store's own optimiser never triggers: the rounds decide when to optimise.
        never = 1e9
        store = EdgeVectorStore(
            Path(tmp) / "store", DIMENSIONS, optimize_idle_s=never, optimize_every_s=never
        )
        await store.ensure_collection()
        newest, stop = [0], asyncio.Event()
        searchers = [
            asyncio.create_task(searcher(store, newest, stop)) for _ in range(args.searchers)
        ]
        for doc in range(args.live + args.rounds):
            await store.upsert(points(doc))
            published = PublishedDocument(
                "t1", "kb1", f"doc{doc}", f"file:{doc}", 1, CHUNKS, readers
            )
            await store.publish_document(published)
            newest[0] = doc
            for _ in range(args.searches):
                await search(store, doc)
            if doc < args.live:
                continue
            await store.delete(chunks_of_document("t1", f"doc{doc - args.live}"))
            churned = doc - args.live + 1
            if optimised and churned % args.optimize_every == 0:
                await store.optimize()
            if churned % args.every == 0:
                release_free_memory()
                held = malloc_info()
                sample = {
                    "churned": churned,
                    "in_use_mb": round(held["in_use"] / 2**20, 1),
                    "heap_mb": round(held["heap"] / 2**20, 1),
                    "mmapped_mb": round(held["mmapped"] / 2**20, 1),
                    "private_mb": process_tree_rss_mb(os.getpid(), "RssAnon"),
                    "python_blocks_k": sys.getallocatedblocks() // 1000,
                }
                print(json.dumps(sample), file=sys.stderr, flush=True)
                samples.append(sample)
        stop.set()
        await asyncio.gather(*searchers)
        await store.close()
    return samples


def figures(mode: str, samples: list[dict[str, float]], live: int) -> dict[str, Any]:
    """A mode's figures from its samples once the live documents have turned over twice (the
    store has reached its working size): the band (least, most) of malloc's memory in use and
    of the private memory in each half of those samples, and how much the band's top moved
    from the first half to the second, in percent. An optimised store swings within a band as
    optimisations come; one that grows with the documents it has seen moves the band up."""
    settled = [sample for sample in samples if sample["churned"] > 2 * live] or samples
    half = max(1, len(settled) // 2)
    result: dict[str, Any] = {f"samples_{mode}": len(settled)}
    for figure in ("in_use_mb", "private_mb"):
        for name, part in (("first", settled[:half]), ("second", settled[-half:])):
            values = [sample[figure] for sample in part]
            result[f"{figure}_band_{name}_half_{mode}"] = [min(values), max(values)]
        top_first = result[f"{figure}_band_first_half_{mode}"][1]
        top_second = result[f"{figure}_band_second_half_{mode}"][1]
        result[f"{figure}_top_growth_pct_{mode}"] = round((top_second / top_first - 1) * 100, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", type=int, default=800, help="documents kept live")
    parser.add_argument("--rounds", type=int, default=6000, help="documents churned")
    parser.add_argument("--searches", type=int, default=1, help="searches per round")
    parser.add_argument("--searchers", type=int, default=0, help="searching beside the writes")
    parser.add_argument("--optimize-every", type=int, default=50, help="rounds per optimisation")
    parser.add_argument("--every", type=int, default=250, help="rounds per sample")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        samples = asyncio.run(churn(args, args.only == "optimised"))
        print(json.dumps(samples))
        return
    print(
        f"store churn: {args.live} live documents of {CHUNKS} chunks, {args.rounds} churned, "
        f"{args.searches} searches a round, optimised every {args.optimize_every} rounds or never",
        flush=True,
    )
    result: dict[str, Any] = {"live": args.live, "rounds": args.rounds}
    for mode in MODES:
        run = subprocess.run(
            [sys.executable, "-m", "benchmarks.store_churn", *sys.argv[1:], "--only", mode],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        samples = json.loads(run.stdout.strip().splitlines()[-1])
        for sample in samples:
            print(f"{mode:>9} {json.dumps(sample)}", flush=True)
        result |= figures(mode, samples, args.live)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

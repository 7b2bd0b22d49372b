"""The embed worker's document embedder under batches of every shape: its throughput and how
much memory malloc holds in use as new shapes come, with oneDNN's primitive cache at the
capacities given, side by side in one run.

    .venv/bin/python -m benchmarks.embed_memory [--capacities 1024 0] [--rounds 2]
                                                [--batches 300] [--seed 1]

torch runs the model's matrix products through oneDNN, which keeps a compiled primitive for
every input shape it met, up to `ONEDNN_PRIMITIVE_CACHE_CAPACITY` (1,024 by default) of them. A
batch's shape is its rows by its longest text, so a worker meets hundreds of shapes and its
memory steps up as new ones come, until the cache is full. Each capacity runs in a process of
its own (the variable is read once), in alternating rounds so that a busy neighbour weighs on
each alike: the same seeded batches (1 to 32 texts of 3 to 400 words of the GPL's text) through
`SentenceTransformerEmbedder` as the embed worker builds it, which hands malloc's free pages
back after every batch. Each round reports texts/s and malloc's memory in use (`mallinfo2`)
after its first 50 batches and at its end. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORDS = Path("/usr/share/common-licenses/GPL-3")
WARM = 50


def batches(seed: int, count: int) -> list[list[str]]:
    """The same batches for every capacity: 1 to 32 texts, short and long ones alike."""
    rng = random.Random(seed)
    words = WORDS.read_text().split()
    made = []
    for _ in range(count):
        texts = []
        for _ in range(rng.randint(1, 32)):
            length = rng.choice([rng.randint(3, 60), rng.randint(60, 400)])
            at = rng.randint(0, len(words) - length)
            texts.append(" ".join(words[at : at + length]))
        made.append(texts)
    return made


def measure(seed: int, count: int) -> dict[str, float]:
    """One round in this process: texts/s, and malloc's memory in use (MB) after the first
    batches and at the end."""
    from infra.embedding.local import SentenceTransformerEmbedder
    from infra.process.malloc import malloc_info
    from infra.settings.embedding import EmbeddingSettings

    embedder = SentenceTransformerEmbedder(EmbeddingSettings())
    work = batches(seed, count)
    texts = 0
    warm_in_use = 0.0
    started = time.perf_counter()
    for n, batch in enumerate(work, 1):
        embedder.embed_documents(batch)
        texts += len(batch)
        if n == min(WARM, count):
            warm_in_use = malloc_info()["in_use"] / 2**20
    elapsed = time.perf_counter() - started
    end_in_use = malloc_info()["in_use"] / 2**20
    return {
        "texts_per_s": round(texts / elapsed, 1),
        "in_use_mb_warm": round(warm_in_use, 1),
        "in_use_mb_end": round(end_in_use, 1),
        "in_use_growth_mb": round(end_in_use - warm_in_use, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embed_memory")
    parser.add_argument("--capacities", type=int, nargs="+", default=[1024, 0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.round:
        print(json.dumps(measure(args.seed, args.batches)))
        return
    runs: dict[int, list[dict[str, float]]] = {capacity: [] for capacity in args.capacities}
    for round_index in range(args.rounds):
        for capacity in args.capacities:
            env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(capacity)}
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.embed_memory", "--round",
                 "--batches", str(args.batches), "--seed", str(args.seed)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            runs[capacity].append(figures)
            print(f"round {round_index + 1}, primitive cache {capacity}: {figures}", flush=True)
    results: dict[str, Any] = {"batches": args.batches, "seed": args.seed}
    for capacity, rounds in runs.items():
        for key in rounds[0]:
            results[f"{key}_cache{capacity}"] = round(statistics.median(r[key] for r in rounds), 2)
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""The MongoDB stand-in as it ages: write latency after tens of thousands of retryable writes,
SecantusDB as it ships beside the stand-in as Ragline runs it (`devstack.mongo_server`), in one
run, alone.

Each server gets a database of its own and `--writes` retryable writes, one after the other,
from one PyMongo client (an upsert of one of a thousand small documents, as a stage's status
write is). The server keeps every retryable write's reply for 30 minutes, at most 10,000; the
figures show what each write costs before and after it holds that many:

- `<server>_write_ms_by_block`: the p50 and p95 of each block of `--block` writes, in order;
- `<server>_write_p50_drift`: the last block's p50 over the first block's.

Run it alone (nothing else on the machine):

    .venv/bin/python -m benchmarks.mongo_aging [--writes 24000] [--block 2000]
    .venv/bin/python -m benchmarks.mongo_aging --tiny   # 3,000 writes, blocks of 1,000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.collection import Collection

from devstack.launcher import ManagedProcess, free_port, port_open

# The server as it ships, and as Ragline's launcher runs it.
SERVERS: dict[str, list[str]] = {
    "secantusdb": [
        sys.executable,
        "-c",
        "import sys; from secantus import cli; sys.exit(cli.main(sys.argv[1:]))",
    ],
    "ragline_standin": [sys.executable, "-m", "devstack.mongo_server"],
}
DOCUMENTS = 1_000
START_TIMEOUT_S = 60.0


def _started(name: str, argv: list[str], work: Path) -> tuple[ManagedProcess, int]:
    port = free_port()
    storage = work / name
    storage.mkdir()
    process = ManagedProcess(
        name,
        [*argv, "--host", "127.0.0.1", "--port", str(port), "--storage-path", str(storage)],
        {"PATH": "/usr/bin:/bin"},
        work / f"{name}.log",
    )
    process.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_open(port):
        if not process.alive() or time.monotonic() > deadline:
            process.stop()
            raise RuntimeError(f"{name} did not start:\n{process.tail()}")
        time.sleep(0.1)
    return process, port


def write_latencies(port: int, writes: int) -> list[float]:
    """Milliseconds of each of `writes` retryable upserts, in order."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true") as client:
        collection: Collection[dict[str, Any]] = client["aging"]["documents"]
        took = []
        for n in range(writes):
            started = time.perf_counter()
            collection.update_one(
                {"_id": f"doc_{n % DOCUMENTS}"},
                {"$set": {"status": "indexing", "n": n}},
                upsert=True,
            )
            took.append((time.perf_counter() - started) * 1000)
        return took


def by_block(took: list[float], block: int) -> list[dict[str, float]]:
    """The p50 and p95 of each block of writes."""
    blocks = [took[at : at + block] for at in range(0, len(took), block)]
    return [
        {
            "p50": round(statistics.median(part), 2),
            "p95": round(statistics.quantiles(part, n=20)[-1], 2),
        }
        for part in blocks
        if len(part) >= 20
    ]


def run(writes: int, block: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"writes": writes, "block": block}
    print("stack settings: none (two MongoDB stand-ins of its own, one after the other)")
    with tempfile.TemporaryDirectory(prefix="ragline-mongo-aging-") as tmp:
        for name, argv in SERVERS.items():
            process, port = _started(name, argv, Path(tmp))
            try:
                blocks = by_block(write_latencies(port, writes), block)
            finally:
                process.stop()
            figures[f"{name}_write_ms_by_block"] = blocks
            figures[f"{name}_write_p50_drift"] = round(blocks[-1]["p50"] / blocks[0]["p50"], 2)
            print(
                f"{name}: p50 by block "
                + " ".join(f"{b['p50']:.2f}" for b in blocks)
                + f" ms (drift {figures[f'{name}_write_p50_drift']})",
                flush=True,
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=24_000)
    parser.add_argument("--block", type=int, default=2_000)
    parser.add_argument("--tiny", action="store_true", help="3,000 writes: a smoke run")
    args = parser.parse_args(argv)
    if args.tiny:
        args.writes, args.block = 3_000, 1_000
    print(json.dumps(run(args.writes, args.block)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
